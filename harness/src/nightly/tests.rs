//! Tests of `nightly.rs`.

use super::*;

fn parse(text: &str) -> anyhow::Result<Suite> {
    parse_suite(text, Path::new("."))?;
    Ok(toml::from_str(text)?)
}

#[test]
fn defaults_fill_a_minimal_suite() {
    let suite = parse("[[test]]\nname = \"a\"\n").unwrap();
    assert_eq!(suite.budget_minutes, 60);
    let test = &suite.tests[0];
    assert_eq!(
        (
            test.nemesis.as_str(),
            test.time_limit,
            test.nodes,
            test.runs
        ),
        ("kill,partition", 60, 3, 1)
    );
}

#[test]
fn unknown_keys_are_named_and_parse_errors_give_the_line() {
    let error = parse("[[test]]\nname = \"a\"\nnemsis = \"kill\"\n").unwrap_err();
    assert!(format!("{error:#}").contains("nemsis"), "{error:#}");
    let error = parse("budget_minutes = 5\n[[test]]\nname = \n").unwrap_err();
    assert!(format!("{error:#}").contains("line 3"), "{error:#}");
}

#[test]
fn the_shipped_suites_parse() {
    for text in [
        include_str!("../../suites/nightly.toml"),
        include_str!("../../suites/smoke.toml"),
        include_str!("../../suites/safe.toml"),
    ] {
        let suite = parse(text).unwrap();
        assert!(suite.tests.iter().all(|t| t.nemesis_script.is_none()));
    }
}

#[test]
fn names_must_be_unique_and_plain() {
    assert!(parse("[[test]]\nname = \"a\"\n[[test]]\nname = \"a\"\n").is_err());
    assert!(parse("[[test]]\nname = \"a/b\"\n").is_err());
    assert!(parse("[[test]]\nname = \"a\"\nruns = 0\n").is_err());
    assert!(parse("[[test]]\nname = \"a\"\nset = [\"acks\"]\n").is_err());
    let error = parse("[[test]]\nname = \"a\"\nworkload = \"streams\"\n").unwrap_err();
    assert!(format!("{error:#}").contains("streams"), "{error:#}");
    assert!(parse("[[test]]\nname = \"a\"\nworkload = \"eos\"\n").is_ok());
}

#[test]
fn xml_is_escaped() {
    assert_eq!(
        xml_escape("a<b & \"c\"\n\u{1b}"),
        "a&lt;b &amp; &quot;c&quot;&#10;"
    );
}

#[test]
fn the_exit_code_puts_errors_first_then_invalid_then_unknown() {
    let entry = |status: &str| Entry {
        test: "t".into(),
        run: 1,
        seed: 1,
        status: status.into(),
        lost: None,
        refused_max_seconds: None,
        ops_per_second: None,
        in_faults_ops_per_second: None,
        rate_warning: None,
        seconds: 0.0,
        path: PathBuf::new(),
        message: String::new(),
        child: None,
    };
    let index = |statuses: &[&str]| Index {
        suite: PathBuf::new(),
        started: String::new(),
        budget_minutes: 0,
        seconds: 0.0,
        dir: PathBuf::new(),
        runs: statuses.iter().map(|s| entry(s)).collect(),
    };
    assert_eq!(index(&["valid", "skipped"]).exit_code(), 0);
    assert_eq!(index(&["valid", "unknown"]).exit_code(), 2);
    assert_eq!(index(&["unknown", "invalid"]).exit_code(), 1);
    assert_eq!(index(&["invalid", "error"]).exit_code(), 3);
    let junit = index(&["invalid", "skipped"]).junit();
    assert!(junit.contains("<testsuite name=\"logjam-nightly\" tests=\"2\" failures=\"1\""));
    assert!(junit.contains("<skipped"));
}
