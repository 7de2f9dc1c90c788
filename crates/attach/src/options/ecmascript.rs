//! The grammar the tool's kernel filters are compiled with: C++ `std::regex` with
//! `std::regex::ECMAScript` (the ECMAScript 3 grammar with the changes of [re.grammar]). A pattern
//! it rejects throws `std::regex_error` inside the target, so [`error`] rejects exactly what that
//! grammar rejects, and nothing of another dialect is taken for it: look-behind, named groups,
//! inline flags such as `(?i)` and possessive quantifiers are errors there, whatever Rust's or
//! PCRE's regexes accept.
//!
//! Checked: groups (`(...)`, `(?:...)`, `(?=...)`, `(?!...)` only) and their balance; quantifiers
//! (`*`, `+`, `?`, `{n}`, `{n,}`, `{n,m}` with n <= m, each optionally lazy with `?`) after
//! something that can repeat (not after an assertion or another quantifier); a `{` that starts
//! no quantifier; character classes (closed, ranges in order, no class escape as a range end);
//! escapes (none trailing, `\c` with a letter, back-references to groups that exist).

/// What is wrong with `pattern` in the ECMAScript grammar, or None when it is valid.
pub fn error(pattern: &str) -> Option<String> {
    let chars: Vec<char> = pattern.chars().collect();
    let groups = count_groups(&chars);
    let mut p = Parser {
        chars: &chars,
        at: 0,
        groups,
    };
    match p.disjunction(0) {
        Err(e) => Some(e),
        Ok(()) if p.at < chars.len() => {
            Some(format!("the ')' at offset {} has no matching '('", p.at))
        }
        Ok(()) => None,
    }
}

/// Capturing groups in the pattern (a `(` not followed by `?`, outside classes and escapes).
fn count_groups(chars: &[char]) -> usize {
    let (mut n, mut i, mut class) = (0, 0, false);
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 1,
            '[' if !class => class = true,
            ']' if class => class = false,
            '(' if !class && chars.get(i + 1) != Some(&'?') => n += 1,
            _ => {}
        }
        i += 1;
    }
    n
}

struct Parser<'a> {
    chars: &'a [char],
    at: usize,
    groups: usize,
}

type Parse = Result<(), String>;

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.at).copied()
    }

    /// Alternatives separated by `|`, up to a `)` (left for the caller) or the end.
    fn disjunction(&mut self, depth: usize) -> Parse {
        loop {
            self.alternative(depth)?;
            match self.peek() {
                Some('|') => self.at += 1,
                _ => return Ok(()),
            }
        }
    }

    fn alternative(&mut self, depth: usize) -> Parse {
        while let Some(c) = self.peek() {
            if c == '|' || (c == ')' && depth > 0) {
                return Ok(());
            }
            if c == ')' {
                return Err(format!("the ')' at offset {} has no matching '('", self.at));
            }
            let repeatable = self.term(depth)?;
            self.quantifier(repeatable)?;
        }
        Ok(())
    }

    /// One assertion or atom; true when a quantifier may follow it.
    fn term(&mut self, depth: usize) -> Result<bool, String> {
        let start = self.at;
        let c = self.chars[start];
        self.at += 1;
        match c {
            '^' | '$' => Ok(false),
            '\\' => self.escape(start),
            '[' => self.class(start).map(|()| true),
            '(' => self.group(start, depth),
            '*' | '+' | '?' => Err(format!("the '{c}' at offset {start} has nothing to repeat")),
            '{' => Err(match self.brace(start) {
                Some(_) => format!("the '{{' at offset {start} has nothing to repeat"),
                None => format!(
                    "the '{{' at offset {start} starts no repetition {{n}}, {{n,}} or {{n,m}} (a literal brace is \\{{)"
                ),
            }),
            _ => Ok(true),
        }
    }

    /// `(`, `(?:`, `(?=`, `(?!` then a disjunction and `)`; look-ahead cannot be repeated.
    fn group(&mut self, start: usize, depth: usize) -> Result<bool, String> {
        let mut repeatable = true;
        if self.peek() == Some('?') {
            match self.chars.get(self.at + 1) {
                Some(':') => {}
                Some('=' | '!') => repeatable = false,
                Some('<') if matches!(self.chars.get(self.at + 2), Some('=' | '!')) => {
                    return Err(format!(
                        "the look-behind at offset {start} is not in the ECMAScript grammar of std::regex (only \
                         look-ahead (?=...) and (?!...) are)"
                    ))
                }
                _ => {
                    return Err(format!(
                        "the '(?' at offset {start} is not a group the ECMAScript grammar knows (only (?:...), (?=...) \
                         and (?!...); no named groups or inline flags such as (?i))"
                    ))
                }
            }
            self.at += 2;
        }
        self.disjunction(depth + 1)?;
        if self.peek() != Some(')') {
            return Err(format!("the '(' at offset {start} is never closed by ')'"));
        }
        self.at += 1;
        Ok(repeatable)
    }

    /// An escape after `\` at `start`: `\b`, `\B` are assertions; back-references must name a
    /// group that exists.
    fn escape(&mut self, start: usize) -> Result<bool, String> {
        let Some(c) = self.peek() else {
            return Err("it ends with a lone backslash".into());
        };
        self.at += 1;
        match c {
            'b' | 'B' => Ok(false),
            'c' => match self.peek() {
                Some(l) if l.is_ascii_alphabetic() => {
                    self.at += 1;
                    Ok(true)
                }
                _ => Err(format!(
                    "the '\\c' at offset {start} needs a control letter (\\cA to \\cZ)"
                )),
            },
            '1'..='9' => {
                let mut n = c.to_digit(10).unwrap_or(0) as usize;
                while let Some(d) = self.peek().and_then(|d| d.to_digit(10)) {
                    n = n.saturating_mul(10).saturating_add(d as usize);
                    self.at += 1;
                }
                if n > self.groups {
                    return Err(format!(
                        "the back-reference \\{n} at offset {start} names a group the pattern does not have ({} \
                         group{})",
                        self.groups,
                        if self.groups == 1 { "" } else { "s" }
                    ));
                }
                Ok(true)
            }
            _ => Ok(true),
        }
    }

    /// A class after `[` at `start`, up to its `]`.
    fn class(&mut self, start: usize) -> Parse {
        if self.peek() == Some('^') {
            self.at += 1;
        }
        // The previous single character, when a '-' may make a range of it; whether the previous
        // item was a class escape (\d, \w, ...), which cannot start a range.
        let mut prev: Option<char> = None;
        let mut after_class = false;
        loop {
            let Some(c) = self.peek() else {
                return Err(format!("the '[' at offset {start} is never closed by ']'"));
            };
            self.at += 1;
            let (item, is_class) = match c {
                ']' => return Ok(()),
                '-' if after_class && self.peek() != Some(']') => {
                    return Err(format!(
                        "the range starting at a class escape in the class at offset {start} has no start character"
                    ))
                }
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err("it ends with a lone backslash".into());
                    };
                    self.at += 1;
                    (e, matches!(e, 'd' | 'D' | 'w' | 'W' | 's' | 'S'))
                }
                '-' if prev.is_some() && self.peek() != Some(']') => {
                    let low = prev.take().unwrap_or('-');
                    let Some(h) = self.peek() else {
                        return Err(format!("the '[' at offset {start} is never closed by ']'"));
                    };
                    self.at += 1;
                    let high = if h == '\\' {
                        let e = self.peek().ok_or("it ends with a lone backslash")?;
                        self.at += 1;
                        if matches!(e, 'd' | 'D' | 'w' | 'W' | 's' | 'S') {
                            return Err(format!(
                                "the range ending in \\{e} in the class at offset {start} has no end character"
                            ));
                        }
                        e
                    } else {
                        h
                    };
                    after_class = false;
                    if low > high {
                        return Err(format!(
                            "the range {low}-{high} in the class at offset {start} is out of order"
                        ));
                    }
                    continue;
                }
                c => (c, false),
            };
            prev = (!is_class).then_some(item);
            after_class = is_class;
        }
    }

    /// A quantifier, if one follows; `repeatable`: whether the term before it may be repeated.
    fn quantifier(&mut self, repeatable: bool) -> Parse {
        let start = self.at;
        let found = match self.peek() {
            Some('*' | '+' | '?') => {
                self.at += 1;
                true
            }
            Some('{') => match self.brace(start) {
                Some((n, m, end)) => {
                    if m.is_some_and(|m| m < n) {
                        return Err(format!(
                            "the repetition {{{n},{}}} at offset {start} has its bounds out of order",
                            m.unwrap_or(0)
                        ));
                    }
                    self.at = end;
                    true
                }
                None => {
                    return Err(format!(
                        "the '{{' at offset {start} starts no repetition {{n}}, {{n,}} or {{n,m}} (a literal brace is \\{{)"
                    ))
                }
            },
            _ => false,
        };
        if !found {
            return Ok(());
        }
        if !repeatable {
            return Err(format!(
                "the '{}' at offset {start} has nothing to repeat (it follows an assertion)",
                self.chars[start]
            ));
        }
        if self.peek() == Some('?') {
            self.at += 1;
        }
        match self.peek() {
            Some(c @ ('*' | '+' | '?' | '{')) => Err(format!(
                "the '{c}' at offset {} repeats a repetition",
                self.at
            )),
            _ => Ok(()),
        }
    }

    /// `{n}`, `{n,}` or `{n,m}` at `start`: (n, m, the offset after `}`).
    fn brace(&self, start: usize) -> Option<(u64, Option<u64>, usize)> {
        let mut i = start + 1;
        let number = |i: &mut usize| {
            let from = *i;
            while self.chars.get(*i).is_some_and(char::is_ascii_digit) {
                *i += 1;
            }
            (*i > from).then(|| {
                self.chars[from..*i]
                    .iter()
                    .collect::<String>()
                    .parse::<u64>()
                    .unwrap_or(u64::MAX)
            })
        };
        let n = number(&mut i)?;
        let m = if self.chars.get(i) == Some(&',') {
            i += 1;
            Some(number(&mut i).unwrap_or(u64::MAX))
        } else {
            None
        };
        (self.chars.get(i) == Some(&'}')).then_some((n, m, i + 1))
    }
}

#[cfg(test)]
mod tests {
    use super::error;

    #[test]
    fn valid_patterns() {
        for ok in [
            "^gemm_.*",
            "a|b",
            "(?=x)y",
            "(?!x)y",
            "(a)\\1",
            "[(]",
            "\\(",
            "a+?",
            "x{2}",
            "x{2,}",
            "x{2,3}?",
            "[a-z0-9_]+",
            "[^\\]]",
            "\\{lambda",
            "",
            "(?:a|b)*",
            "[\\d-]",
            "[a-]",
            "\\bword\\b",
            "a|",
        ] {
            assert_eq!(error(ok), None, "{ok}");
        }
    }

    #[test]
    fn what_ecmascript_rejects() {
        for bad in [
            "a{2,1}",
            "(?<=x)a",
            "(?<!x)a",
            "(?<name>a)",
            "(?i)gemm",
            "(",
            "a)",
            "[abc",
            "*a",
            "a|+",
            "a\\",
            "(?:a",
            "a**",
            "a*+",
            "^*",
            "\\b+",
            "(?=a)*",
            "{lambda",
            "a{x}",
            "[z-a]",
            "\\2(a)",
            "\\c1",
            "[\\d-z]",
        ] {
            assert!(error(bad).is_some(), "{bad}");
        }
    }
}
