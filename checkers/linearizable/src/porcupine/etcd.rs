//! The etcd Jepsen logs: one compare-and-set register per file.
//!
//! Each event line is `INFO jepsen.util - <process> :<type> :<f> <value>`
//! with any whitespace between fields. Mapping to operations:
//!
//! | event | becomes |
//! | --- | --- |
//! | `:invoke :read nil`, `:invoke :write v`, `:invoke :cas [a b]` | a call |
//! | `:ok :read v` / `:ok :read nil` | returns `Read(Some(v))` / `Read(None)` |
//! | `:ok :write v` | returns `Written` |
//! | `:ok :cas [a b]` / `:fail :cas [a b]` | returns `Cas { succeeded: true / false }` |
//! | `:fail :read :timed-out` | returns [`Outcome::Unknown`] at that line |
//! | `:info …` (timed out) | never returns: [`Timestamp::INFINITY`], unknown |
//! | other `:fail` (write, read) | definitely did not happen: dropped |
//! | call still open at end of file | never returns, unknown |
//!
//! The first four rows and the two "never returns" rows are exactly how
//! Porcupine's test parser treats these files; Porcupine has no rule for a
//! failed write or plain failed read because none occurs.

use crate::models::cas::{CasOp, CasResult};
use crate::operation::{ClientId, Operation, Outcome, Timestamp};
use crate::porcupine::{ImportError, read_text};
use std::collections::HashMap;
use std::path::Path;

/// One etcd history operation.
pub type EtcdOperation = Operation<CasOp<i64>, CasResult<i64>>;

/// Reads and parses one `etcd_NNN.log`.
///
/// # Errors
///
/// [`ImportError`] naming the file and line.
pub fn read_etcd_log(path: &Path) -> Result<Vec<EtcdOperation>, ImportError> {
    parse_etcd_log(&path.display().to_string(), &read_text(path)?)
}

/// Parses the text of an etcd log; `source` names it in errors.
///
/// # Errors
///
/// [`ImportError`] naming `source` and the line.
pub fn parse_etcd_log(source: &str, text: &str) -> Result<Vec<EtcdOperation>, ImportError> {
    let mut slots: Vec<Option<EtcdOperation>> = Vec::new();
    // process -> (slot, invoke line)
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
        if event.kind == EventKind::Invoke {
            if let Some(&(_, open_line)) = open.get(&event.process) {
                return Err(ImportError::ProcessBusy {
                    file: source.to_owned(),
                    line,
                    process: event.process,
                    open_line,
                });
            }
            let input = match (event.function, event.value) {
                (Function::Read, Value::Nil) => CasOp::Read,
                (Function::Write, Value::Int(value)) => CasOp::Write(value),
                (Function::Cas, Value::Pair(from, to)) => CasOp::Cas { from, to },
                _ => return Err(malformed("invoke value does not fit the function")),
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
        let invoked = function_of(&operation.input);
        if invoked != event.function {
            return Err(ImportError::MismatchedCompletion {
                file: source.to_owned(),
                line,
                process: event.process,
                invoked: invoked.name(),
                completed: event.function.name(),
            });
        }
        let completion = match (event.kind, event.function, event.value) {
            (EventKind::Ok, Function::Read, Value::Nil) => {
                Some(Outcome::Returned(CasResult::Read(None)))
            }
            (EventKind::Ok, Function::Read, Value::Int(value)) => {
                Some(Outcome::Returned(CasResult::Read(Some(value))))
            }
            (EventKind::Ok, Function::Write, Value::Int(_)) => {
                Some(Outcome::Returned(CasResult::Written))
            }
            (EventKind::Ok, Function::Cas, Value::Pair(..)) => {
                Some(Outcome::Returned(CasResult::Cas { succeeded: true }))
            }
            (EventKind::Fail, Function::Cas, Value::Pair(..)) => {
                Some(Outcome::Returned(CasResult::Cas { succeeded: false }))
            }
            (EventKind::Fail, Function::Read, Value::TimedOut) => Some(Outcome::Unknown),
            (EventKind::Fail, _, _) => None,
            (EventKind::Info, _, _) => {
                // Indeterminate: the slot already holds a never-returning op.
                continue;
            }
            _ => return Err(malformed("completion value does not fit the function")),
        };
        match completion {
            Some(output) => {
                operation.output = output;
                operation.return_at = Timestamp(time);
            }
            None => slots[slot] = None,
        }
    }
    Ok(slots.into_iter().flatten().collect())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EventKind {
    Invoke,
    Ok,
    Fail,
    Info,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Function {
    Read,
    Write,
    Cas,
}

impl Function {
    fn name(self) -> &'static str {
        match self {
            Function::Read => ":read",
            Function::Write => ":write",
            Function::Cas => ":cas",
        }
    }
}

fn function_of(input: &CasOp<i64>) -> Function {
    match input {
        CasOp::Read => Function::Read,
        CasOp::Write(_) => Function::Write,
        CasOp::Cas { .. } => Function::Cas,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Value {
    Nil,
    Int(i64),
    Pair(i64, i64),
    TimedOut,
}

struct Event {
    process: u64,
    kind: EventKind,
    function: Function,
    value: Value,
}

fn parse_event(line: &str) -> Result<Event, &'static str> {
    let mut fields = line.split_whitespace();
    if fields.next() != Some("INFO")
        || fields.next() != Some("jepsen.util")
        || fields.next() != Some("-")
    {
        return Err("expected `INFO jepsen.util - `");
    }
    let process = fields
        .next()
        .and_then(|field| field.parse::<u64>().ok())
        .ok_or("expected a process id")?;
    let kind = match fields.next() {
        Some(":invoke") => EventKind::Invoke,
        Some(":ok") => EventKind::Ok,
        Some(":fail") => EventKind::Fail,
        Some(":info") => EventKind::Info,
        _ => return Err("expected :invoke, :ok, :fail or :info"),
    };
    let function = match fields.next() {
        Some(":read") => Function::Read,
        Some(":write") => Function::Write,
        Some(":cas") => Function::Cas,
        _ => return Err("expected :read, :write or :cas"),
    };
    let rest: Vec<&str> = fields.collect();
    let value =
        parse_value(&rest.join(" ")).ok_or("expected nil, an integer, [a b] or :timed-out")?;
    Ok(Event {
        process,
        kind,
        function,
        value,
    })
}

fn parse_value(text: &str) -> Option<Value> {
    match text {
        "nil" => return Some(Value::Nil),
        ":timed-out" => return Some(Value::TimedOut),
        _ => {}
    }
    if let Some(inner) = text
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        let mut numbers = inner.split_whitespace().map(str::parse::<i64>);
        let from = numbers.next()?.ok()?;
        let to = numbers.next()?.ok()?;
        return numbers.next().is_none().then_some(Value::Pair(from, to));
    }
    text.parse::<i64>().ok().map(Value::Int)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "INFO  jepsen.util - 0\t:invoke\t:read\tnil
INFO  jepsen.util - 1\t:invoke\t:cas\t[3 0]
INFO  jepsen.util - 2   :invoke :write  4
INFO  jepsen.util - 0\t:ok\t:read\tnil
INFO  jepsen.util - 1\t:fail\t:cas\t[3 0]
INFO  jepsen.util - 2\t:info\t:write\t:timed-out
INFO  jepsen.util - 3\t:invoke\t:read\tnil
INFO  jepsen.util - 3   :fail   :read   :timed-out
INFO  jepsen.util - 4\t:invoke\t:cas\t[1 2]
";

    #[test]
    fn maps_every_event_kind() {
        let ops = parse_etcd_log("sample", SAMPLE).expect("parses");
        assert_eq!(ops.len(), 5);
        assert_eq!(ops[0].input, CasOp::Read);
        assert_eq!(ops[0].output, Outcome::Returned(CasResult::Read(None)));
        assert_eq!(
            (ops[0].call, ops[0].return_at),
            (Timestamp(1), Timestamp(4))
        );
        assert_eq!(
            ops[1].output,
            Outcome::Returned(CasResult::Cas { succeeded: false })
        );
        assert_eq!(ops[2].input, CasOp::Write(4));
        assert!(ops[2].is_optional() && ops[2].output.is_unknown());
        assert_eq!(ops[3].output, Outcome::Unknown);
        assert_eq!(ops[3].return_at, Timestamp(8));
        assert!(ops[4].is_optional());
    }

    #[test]
    fn malformed_line_names_file_and_line() {
        let error = parse_etcd_log(
            "bad.log",
            "INFO  jepsen.util - 0\t:invoke\t:read\tnil\nINFO jepsen.util - x :ok :read 1\n",
        )
        .expect_err("bad process id");
        let text = error.to_string();
        assert!(text.starts_with("bad.log:2:"), "{text}");
    }

    #[test]
    fn completion_without_invoke_is_an_error() {
        let error =
            parse_etcd_log("x.log", "INFO jepsen.util - 5 :ok :read 1\n").expect_err("no invoke");
        assert!(matches!(
            error,
            ImportError::CompletionWithoutInvoke {
                line: 1,
                process: 5,
                ..
            }
        ));
    }

    #[test]
    fn busy_process_is_an_error() {
        let text =
            "INFO jepsen.util - 5 :invoke :read nil\nINFO jepsen.util - 5 :invoke :read nil\n";
        let error = parse_etcd_log("x.log", text).expect_err("busy");
        assert!(matches!(
            error,
            ImportError::ProcessBusy {
                line: 2,
                open_line: 1,
                ..
            }
        ));
    }
}
