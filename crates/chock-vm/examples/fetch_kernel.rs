//! Fetches the guest kernel into the directory named by the first argument (what `chock vm
//! kernel --dir DIR` does), for CI, which needs it before it builds `chock` itself.

fn main() {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: fetch_kernel DIR");
        std::process::exit(2);
    };
    match chock_vm::kernel::fetch(std::path::Path::new(&dir)) {
        Ok(k) => println!("guest kernel {} in {}", k.release, dir.to_string_lossy()),
        Err(e) => {
            eprintln!("fetch_kernel: {e}");
            std::process::exit(1);
        }
    }
}
