//! The key-value histories `kv/cNN-{ok,bad}.txt`: one EDN map per line,
//! `{:process P, :type :invoke|:ok, :f :get|:put|:append, :key "K", :value V}`
//! where `V` is a string, or `nil` on a get's invoke.
//!
//! | event | becomes |
//! | --- | --- |
//! | `:invoke` get / put / append | a call |
//! | `:ok :get "v"` | returns `Value("v")` |
//! | `:ok` put / append | returns `Done` |
//! | `:info` | never returns: [`Timestamp::INFINITY`], unknown |
//! | `:fail` | definitely did not happen: dropped |
//! | call still open at end of file | never returns, unknown |
//!
//! The corpus has only invokes and oks, all matched. (Porcupine's parser
//! would give a call left open an empty-string output; we use "unknown",
//! which is the honest reading and never arises here.)

use crate::models::kv::{KvOp, KvResult};
use crate::operation::{ClientId, Operation, Outcome, Timestamp};
use crate::porcupine::{ImportError, read_text};
use std::collections::HashMap;
use std::path::Path;

/// One key-value history operation.
pub type KvOperation = Operation<KvOp, KvResult>;

/// Reads and parses one `cNN-*.txt`.
///
/// # Errors
///
/// [`ImportError`] naming the file and line.
pub fn read_kv_log(path: &Path) -> Result<Vec<KvOperation>, ImportError> {
    parse_kv_log(&path.display().to_string(), &read_text(path)?)
}

/// Parses the text of a kv history; `source` names it in errors.
///
/// # Errors
///
/// [`ImportError`] naming `source` and the line.
pub fn parse_kv_log(source: &str, text: &str) -> Result<Vec<KvOperation>, ImportError> {
    let mut slots: Vec<Option<KvOperation>> = Vec::new();
    let mut open: HashMap<u64, (usize, usize)> = HashMap::new();
    for (index, raw) in text.lines().enumerate() {
        let line = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let malformed = |reason: &'static str| ImportError::MalformedLine {
            file: source.to_owned(),
            line,
            reason,
            text: raw.to_owned(),
        };
        let event = parse_event(raw).map_err(malformed)?;
        let time = line as u64;
        if event.kind == ":invoke" {
            if let Some(&(_, open_line)) = open.get(&event.process) {
                return Err(ImportError::ProcessBusy {
                    file: source.to_owned(),
                    line,
                    process: event.process,
                    open_line,
                });
            }
            let input = match (event.function, event.value) {
                (":get", EdnValue::Nil) => KvOp::Get { key: event.key },
                (":put", EdnValue::String(value)) => KvOp::Put {
                    key: event.key,
                    value,
                },
                (":append", EdnValue::String(value)) => KvOp::Append {
                    key: event.key,
                    value,
                },
                _ => {
                    return Err(malformed(
                        "expected :get with nil, or :put/:append with a string",
                    ));
                }
            };
            let _previous = open.insert(event.process, (slots.len(), line));
            slots.push(Some(Operation::indeterminate(
                ClientId(event.process),
                input,
                time,
            )));
            continue;
        }
        let Some((slot, _)) = open.remove(&event.process) else {
            return Err(ImportError::CompletionWithoutInvoke {
                file: source.to_owned(),
                line,
                process: event.process,
            });
        };
        let operation = slots[slot].as_mut().expect("open slots are filled");
        let invoked = function_name(&operation.input);
        if invoked != event.function {
            return Err(ImportError::MismatchedCompletion {
                file: source.to_owned(),
                line,
                process: event.process,
                invoked,
                completed: function_name_static(event.function),
            });
        }
        match (event.kind, event.function, event.value) {
            (":ok", ":get", EdnValue::String(value)) => {
                operation.output = Outcome::Returned(KvResult::Value(value));
                operation.return_at = Timestamp(time);
            }
            (":ok", ":put" | ":append", _) => {
                operation.output = Outcome::Returned(KvResult::Done);
                operation.return_at = Timestamp(time);
            }
            (":info", _, _) => {}
            (":fail", _, _) => slots[slot] = None,
            _ => return Err(malformed("completion value does not fit the function")),
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

fn function_name(input: &KvOp) -> &'static str {
    match input {
        KvOp::Get { .. } => ":get",
        KvOp::Put { .. } => ":put",
        KvOp::Append { .. } => ":append",
    }
}

fn function_name_static(function: &str) -> &'static str {
    match function {
        ":get" => ":get",
        ":put" => ":put",
        ":append" => ":append",
        _ => "an unknown function",
    }
}

/// A value in an event map.
#[derive(Clone, Debug, PartialEq, Eq)]
enum EdnValue {
    Nil,
    Integer(u64),
    Keyword(String),
    String(String),
}

/// One event line, with the fields this corpus uses.
struct Event<'a> {
    process: u64,
    kind: &'a str,
    function: &'a str,
    key: String,
    value: EdnValue,
}

fn parse_event(line: &str) -> Result<Event<'static>, &'static str> {
    let entries = parse_map(line)?;
    let mut process = None;
    let mut kind = None;
    let mut function = None;
    let mut key = None;
    let mut value = None;
    for (name, entry) in entries {
        match (name.as_str(), entry) {
            (":process", EdnValue::Integer(number)) => process = Some(number),
            (":type", EdnValue::Keyword(keyword)) => {
                kind = Some(match keyword.as_str() {
                    ":invoke" => ":invoke",
                    ":ok" => ":ok",
                    ":fail" => ":fail",
                    ":info" => ":info",
                    _ => return Err("expected :type :invoke, :ok, :fail or :info"),
                });
            }
            (":f", EdnValue::Keyword(keyword)) => {
                function = Some(match keyword.as_str() {
                    ":get" => ":get",
                    ":put" => ":put",
                    ":append" => ":append",
                    _ => return Err("expected :f :get, :put or :append"),
                });
            }
            (":key", EdnValue::String(text)) => key = Some(text),
            (":value", entry) => value = Some(entry),
            _ => return Err("unexpected key or value type"),
        }
    }
    Ok(Event {
        process: process.ok_or("missing :process")?,
        kind: kind.ok_or("missing :type")?,
        function: function.ok_or("missing :f")?,
        key: key.ok_or("missing :key")?,
        value: value.ok_or("missing :value")?,
    })
}

/// Parses `{:k v, :k v}` with keyword keys and nil / integer / keyword /
/// string values (strings may escape `"` and `\`).
fn parse_map(line: &str) -> Result<Vec<(String, EdnValue)>, &'static str> {
    let text = line.trim();
    let inner = text
        .strip_prefix('{')
        .and_then(|rest| rest.strip_suffix('}'))
        .ok_or("expected a {…} map")?;
    let mut chars = inner.chars().peekable();
    let mut entries = Vec::new();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace() || *c == ',') {
            let _skipped = chars.next();
        }
        if chars.peek().is_none() {
            return Ok(entries);
        }
        let name = match read_atom(&mut chars) {
            EdnValue::Keyword(name) => name,
            _ => return Err("map keys must be keywords"),
        };
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            let _skipped = chars.next();
        }
        let value = if chars.peek() == Some(&'"') {
            let _quote = chars.next();
            let mut text = String::new();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some('\\') => match chars.next() {
                        Some('n') => text.push('\n'),
                        Some('t') => text.push('\t'),
                        Some(other) => text.push(other),
                        None => return Err("unterminated string"),
                    },
                    Some(other) => text.push(other),
                    None => return Err("unterminated string"),
                }
            }
            EdnValue::String(text)
        } else {
            match read_atom(&mut chars) {
                EdnValue::Keyword(atom) if atom.is_empty() => return Err("missing value"),
                other => other,
            }
        };
        entries.push((name, value));
    }
}

/// Reads a bare token up to whitespace, comma or end, and classifies it.
fn read_atom(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> EdnValue {
    let mut token = String::new();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() || c == ',' {
            break;
        }
        token.push(c);
        let _taken = chars.next();
    }
    if token == "nil" {
        EdnValue::Nil
    } else if let Ok(number) = token.parse::<u64>() {
        EdnValue::Integer(number)
    } else {
        // Keywords keep their colon; anything else is reported by callers
        // as a wrong type.
        EdnValue::Keyword(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"{:process 0, :type :invoke, :f :append, :key "0", :value "x 0 0 y"}
{:process 1, :type :invoke, :f :get, :key "0", :value nil}
{:process 0, :type :ok, :f :append, :key "0", :value "x 0 0 y"}
{:process 1, :type :ok, :f :get, :key "0", :value "x 0 0 y"}
{:process 2, :type :invoke, :f :put, :key "1", :value "a \"q\""}
"#;

    #[test]
    fn parses_invokes_oks_and_open_calls() {
        let ops = parse_kv_log("sample", SAMPLE).expect("parses");
        assert_eq!(ops.len(), 3);
        assert_eq!(
            ops[0].input,
            KvOp::Append {
                key: "0".to_owned(),
                value: "x 0 0 y".to_owned()
            }
        );
        assert_eq!(ops[0].output, Outcome::Returned(KvResult::Done));
        assert_eq!(
            ops[1].output,
            Outcome::Returned(KvResult::Value("x 0 0 y".to_owned()))
        );
        assert_eq!(
            (ops[1].call, ops[1].return_at),
            (Timestamp(2), Timestamp(4))
        );
        assert_eq!(
            ops[2].input,
            KvOp::Put {
                key: "1".to_owned(),
                value: "a \"q\"".to_owned()
            }
        );
        assert!(ops[2].is_optional());
    }

    #[test]
    fn malformed_line_names_file_and_line() {
        let text = "{:process 0, :type :invoke, :f :get, :key \"0\", :value nil}\n{:process 0, :type :ok, :f :get, :key \"0\", :value \"x}\n";
        let error = parse_kv_log("c.txt", text).expect_err("unterminated string");
        assert!(error.to_string().starts_with("c.txt:2:"), "{error}");
    }

    #[test]
    fn mismatched_completion_is_an_error() {
        let text = "{:process 0, :type :invoke, :f :get, :key \"0\", :value nil}\n{:process 0, :type :ok, :f :put, :key \"0\", :value \"x\"}\n";
        let error = parse_kv_log("c.txt", text).expect_err("mismatch");
        assert!(matches!(
            error,
            ImportError::MismatchedCompletion { line: 2, .. }
        ));
    }
}
