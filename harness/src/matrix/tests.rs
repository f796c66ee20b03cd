//! Tests of `matrix.rs`, kept apart so the module itself stays readable.

use super::*;

fn sets(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn matrix_args(argv: &[&str]) -> MatrixArgs {
    use clap::Parser;
    let cli = crate::cli::Cli::try_parse_from(["logjam", "matrix"].iter().chain(argv))
        .expect("arguments parse");
    match cli.command {
        crate::cli::Command::Matrix(args) => args,
        _ => unreachable!("a matrix command"),
    }
}

#[test]
fn run_default_faults_become_the_matrix_faults_and_last_longer() {
    let (args, rotate) = with_matrix_faults(&matrix_args(&[]));
    assert_eq!(
        (args.run.nemesis.as_str(), args.run.nemesis_interval, rotate),
        (MATRIX_NEMESIS, MATRIX_INTERVAL, true)
    );
    // A chosen interval stays, and chosen faults keep run's interval.
    let (args, rotate) = with_matrix_faults(&matrix_args(&["--nemesis-interval", "7"]));
    assert_eq!(
        (args.run.nemesis.as_str(), args.run.nemesis_interval, rotate),
        (MATRIX_NEMESIS, 7, true)
    );
    // Faults the user lists are a mix they asked for: every run draws from all of them.
    let (args, rotate) = with_matrix_faults(&matrix_args(&["--nemesis", "pause"]));
    assert_eq!(
        (args.run.nemesis.as_str(), args.run.nemesis_interval, rotate),
        ("pause", DEFAULT_NEMESIS_INTERVAL, false)
    );
    let (_, rotate) = with_matrix_faults(&matrix_args(&["--nemesis", MATRIX_NEMESIS]));
    assert!(!rotate);
}

#[test]
fn the_default_sweep_has_eight_cells_last_key_fastest() {
    let cells = Sweep::parse(&sets(DEFAULT_SWEEP)).unwrap().cells();
    assert_eq!(cells.len(), 8);
    assert_eq!(
        cells[0].settings,
        sets(&[
            "acks=1",
            "min.insync.replicas=1",
            "unclean.leader.election.enable=false"
        ])
    );
    assert_eq!(
        cells[1].name,
        "acks=1 min.insync.replicas=1 unclean.leader.election.enable=true"
    );
    assert_eq!(
        cells[7].name,
        "acks=all min.insync.replicas=2 unclean.leader.election.enable=true"
    );
}

#[test]
fn single_valued_settings_go_to_every_cell_but_not_into_its_name() {
    let sweep = Sweep::parse(&sets(&["replication.factor=1", "acks=0,1"])).unwrap();
    let cells = sweep.cells();
    assert_eq!(cells.len(), 2);
    assert_eq!(cells[0].name, "acks=0");
    assert_eq!(cells[1].settings, sets(&["replication.factor=1", "acks=1"]));
    assert_eq!(sweep.fixed_settings(), sets(&["replication.factor=1"]));
}

#[test]
fn a_sweep_without_multi_valued_keys_is_one_cell() {
    let cells = Sweep::parse(&sets(&["acks=all"])).unwrap().cells();
    assert_eq!(cells.len(), 1);
    assert_eq!(cells[0].settings, sets(&["acks=all"]));
}

#[test]
fn bad_sets_are_refused() {
    assert!(Sweep::parse(&sets(&["acks"])).is_err());
    assert!(Sweep::parse(&sets(&["acks=1,,all"])).is_err());
    assert!(Sweep::parse(&sets(&["acks=1", "acks=all"])).is_err());
}

#[test]
fn a_failed_child_is_explained_by_its_last_logjam_line() {
    let tail = VecDeque::from(sets(&[
        "logjam: run x (seed 1)",
        "logjam: the cluster did not become ready within 60 s",
        "trailing noise",
    ]));
    assert_eq!(
        failure_line(Some(3), &tail),
        "exit 3: logjam: the cluster did not become ready within 60 s"
    );
}

#[test]
fn the_runs_of_a_cell_take_the_default_faults_in_turn() {
    let faults: Vec<String> = (0..4).map(|j| rotated_fault(MATRIX_NEMESIS, j)).collect();
    assert_eq!(
        faults,
        [
            "isr-shrink-kill",
            "isr-shrink-power-loss",
            "isr-shrink-kill",
            "isr-shrink-power-loss"
        ]
    );
}

#[test]
fn a_row_names_each_runs_fault_when_the_runs_took_them_in_turn() {
    let mut summary = CellSummary {
        lost_total: 129,
        lost_per_run: vec![Some(0), Some(129)],
        acknowledged_total: 2000,
        ..CellSummary::default()
    };
    assert_eq!(summary.lost(), "129 (0, 129) of 2000");
    summary.run_labels = vec!["kill".to_owned(), "power-loss".to_owned()];
    assert_eq!(summary.lost(), "129 (0 kill, 129 power-loss) of 2000");
}
