pub fn probe_all() {}
