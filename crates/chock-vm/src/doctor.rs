//! `chock doctor`'s row for the microVM guest: which accelerator a guest would run with and why,
//! and whether the monitor, the kernel, the guest's init and the monitor's confinement
//! (`chock-confine`) are there. Informational: only a project with `[sandbox] isolation =
//! "microvm"` needs it, and its session fails to open without it.

use chock_sandbox::doctor::LayerReport;

/// The row.
pub fn row() -> LayerReport {
    let accel = crate::accel::choose();
    let mut missing = Vec::new();
    if !std::path::Path::new("/usr/bin/qemu-system-x86_64").is_file() {
        missing.push("qemu-system-x86_64 (Debian: qemu-system-x86)".to_string());
    }
    let kernel = crate::kernel::default_dir()
        .ok_or_else(|| "no kernel directory".to_string())
        .and_then(|d| crate::GuestKernel::open(&d).map_err(|e| e.to_string()));
    let kernel_words = match &kernel {
        Ok(k) if k.nine_p => format!("kernel {}", k.release),
        Ok(k) => format!(
            "kernel {} (without the 9p modules its guests cannot be snapshotted: `chock vm \
             kernel` fetches them)",
            k.release
        ),
        Err(e) => {
            missing.push(e.clone());
            String::new()
        }
    };
    match crate::default_guest_init().filter(|p| p.is_file()) {
        None => missing.push("the guest's init chock-guest (beside chock)".into()),
        Some(init) => {
            if crate::confine::default_helper(&init).is_err() {
                missing.push(format!(
                    "the monitor's confinement {} (beside chock-guest)",
                    crate::confine::HELPER
                ));
            }
        }
    }
    let on = missing.is_empty();
    let detail = if on {
        format!(
            "[sandbox] isolation = \"microvm\" would boot {kernel_words} under {} ({})",
            accel.accel.name(),
            accel.why
        )
    } else {
        format!(
            "would run under {} ({}); missing: {}",
            accel.accel.name(),
            accel.why,
            missing.join("; ")
        )
    };
    LayerReport {
        layer: "microvm guest".into(),
        required: false,
        on,
        detail,
    }
}
