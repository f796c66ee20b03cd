//! Tests of `op.rs`, kept apart so the module itself stays readable.

use super::*;

#[test]
fn micro_ops_round_trip_in_jepsen_shapes() {
    let json = r#"[["send",1,[5,10]],["send",2,7],["poll"],["poll",{"3":[[0,1],[2,4]]}]]"#;
    let ops: Vec<MicroOp> = serde_json::from_str(json).unwrap();
    assert_eq!(
        ops[0],
        MicroOp::Send {
            key: Key(1),
            value: Value(10),
            offset: Some(Offset(5))
        }
    );
    assert_eq!(serde_json::to_string(&ops).unwrap(), json);
}

#[test]
fn send_with_null_offset_reads_as_unknown_offset() {
    let op: MicroOp = serde_json::from_str(r#"["send",1,[null,10]]"#).unwrap();
    assert_eq!(
        op,
        MicroOp::Send {
            key: Key(1),
            value: Value(10),
            offset: None
        }
    );
}

#[test]
fn value_before_f_is_decoded_once_f_is_known() {
    let op = Op::from_json_line(
        r#"{"value":[["send",1,[2,3]]],"f":"send","index":0,"time":5,"process":1,"type":"ok"}"#,
    )
    .unwrap();
    assert_eq!(op.f, Function::Send);
    assert_eq!(op.value.micro_ops().len(), 1);
    let bad = Op::from_json_line(
        r#"{"value":[["send",1]],"f":"send","index":0,"time":5,"process":1,"type":"ok"}"#,
    );
    assert!(matches!(bad, Err(OpDecodeError::Value { .. })));
}

#[test]
fn unknown_micro_op_is_rejected() {
    assert!(serde_json::from_str::<MicroOp>(r#"["append",1,2]"#).is_err());
}

#[test]
fn fetch_ranges_round_trip_and_old_polls_read_without_them() {
    let json = r#"["poll",{"1":[[4,10]],"2":[]},{"1":[3,5,5,2],"2":[7,7,7,2]}]"#;
    let op: MicroOp = serde_json::from_str(json).unwrap();
    let MicroOp::Poll { reads: Some(reads) } = &op else {
        panic!("{op:?}")
    };
    assert_eq!(
        reads[0].fetch,
        Some(Fetched {
            from: Offset(3),
            to: Offset(5),
            lso: Offset(5),
            epoch: 2
        })
    );
    assert!(reads[1].records.is_empty());
    assert_eq!(reads[1].fetch.map(|f| f.lso), Some(Offset(7)));
    assert_eq!(serde_json::to_string(&op).unwrap(), json);
    // A key only in the fetch map is a key fetched with nothing returned.
    let op: MicroOp = serde_json::from_str(r#"["poll",{},{"3":[1,1,1,0]}]"#).unwrap();
    let MicroOp::Poll { reads: Some(reads) } = &op else {
        panic!("{op:?}")
    };
    assert_eq!((reads[0].key, reads[0].records.len()), (Key(3), 0));
    // Without it: as before.
    let op: MicroOp = serde_json::from_str(r#"["poll",{"1":[[4,10]]}]"#).unwrap();
    let MicroOp::Poll { reads: Some(reads) } = &op else {
        panic!("{op:?}")
    };
    assert_eq!(reads[0].fetch, None);
    // Malformed: negative LSO, a range that ends before it starts, a fifth element.
    for bad in [
        r#"["poll",{},{"1":[1,2,-1,0]}]"#,
        r#"["poll",{},{"1":[5,2,6,0]}]"#,
        r#"["poll",{},{"1":[1,2,3]}]"#,
        r#"["poll",{},{},1]"#,
    ] {
        let error = serde_json::from_str::<MicroOp>(bad).unwrap_err();
        assert!(!error.to_string().is_empty(), "{bad}");
    }
}
