//! The environment list we send and its wire encoding (protocol section 5.10). Work in progress.

/// An ordered environment (name, value) list that behaves like C `environ` under setenv.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvList {
    vars: Vec<(String, String)>,
}

impl EnvList {
    /// Set `name` (in place if present, else appended).
    pub fn set(&mut self, name: &str, value: &str) {
        match self.vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value.to_string(),
            None => self.vars.push((name.to_string(), value.to_string())),
        }
    }
}
