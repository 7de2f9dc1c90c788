//! Links the system OTF2 library (Debian/Ubuntu: libopen-trace-format2-dev).

fn main() {
    println!("cargo:rustc-link-lib=open-trace-format2");
}
