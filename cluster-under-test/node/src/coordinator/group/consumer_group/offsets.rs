//! What a KIP-848 group asks of offset commits and fetches (Kafka's
//! `ConsumerGroup.validateOffsetCommit` / `validateOffsetFetch`), for the offsets code of the
//! group coordinator to call: a member commits and fetches at exactly its current epoch.

use kafka_protocol::ResponseError;

use super::state::ConsumerGroup;

impl ConsumerGroup {
    /// Checks an `OffsetCommit` (or `TxnOffsetCommit`) from `member_id` at `member_epoch`.
    ///
    /// # Errors
    /// `UNKNOWN_MEMBER_ID` for a member the group does not have; `UNSUPPORTED_VERSION` for a
    /// non-transactional commit below version 9 (the new protocol needs the epoch field);
    /// `STALE_MEMBER_EPOCH` when the epoch is not the member's.
    pub fn validate_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        transactional: bool,
        api_version: i16,
    ) -> Result<(), ResponseError> {
        // Epoch -1: the admin client or a consumer without group management; allowed only
        // while the group is empty.
        if member_epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        let member = self
            .members
            .get(member_id)
            .ok_or(ResponseError::UnknownMemberId)?;
        if !transactional && api_version < 9 {
            return Err(ResponseError::UnsupportedVersion);
        }
        if member.current.member_epoch != member_epoch {
            return Err(ResponseError::StaleMemberEpoch);
        }
        Ok(())
    }

    /// Checks a `TxnOffsetCommit` from `member_id` at `member_epoch` (Kafka's
    /// `OffsetMetadataManager.validateTransactionalOffsetCommit`): as a commit, but a stale
    /// epoch answers `ILLEGAL_GENERATION`, which a transactional producer treats as an
    /// abortable `CommitFailedException` (it knows no `STALE_MEMBER_EPOCH` there).
    ///
    /// # Errors
    /// `UNKNOWN_MEMBER_ID`; `ILLEGAL_GENERATION` when the epoch is not the member's.
    pub fn validate_txn_offset_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        self.validate_offset_commit(member_id, member_epoch, true, 0)
            .map_err(|error| match error {
                ResponseError::StaleMemberEpoch => ResponseError::IllegalGeneration,
                other => other,
            })
    }

    /// Checks an `OffsetFetch` naming `member_id` (`None` with epoch -1: the admin client).
    ///
    /// # Errors
    /// `UNKNOWN_MEMBER_ID` or `STALE_MEMBER_EPOCH` as for a commit.
    pub fn validate_offset_fetch(
        &self,
        member_id: Option<&str>,
        member_epoch: i32,
    ) -> Result<(), ResponseError> {
        if member_id.is_none() && member_epoch < 0 {
            return Ok(());
        }
        let member = member_id
            .and_then(|id| self.members.get(id))
            .ok_or(ResponseError::UnknownMemberId)?;
        if member.current.member_epoch != member_epoch {
            return Err(ResponseError::StaleMemberEpoch);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::coordinator::group::consumer_group::state::Member;

    fn group() -> ConsumerGroup {
        let mut group = ConsumerGroup::new("g");
        let mut member = Member::new("a");
        member.current.member_epoch = 4;
        group.members.insert("a".into(), member);
        group
    }

    #[test]
    fn commits_need_the_members_current_epoch() {
        let group = group();
        let cases = [
            ("current epoch", "a", 4, false, 9, Ok(())),
            (
                "stale epoch",
                "a",
                3,
                false,
                9,
                Err(ResponseError::StaleMemberEpoch),
            ),
            (
                "future epoch",
                "a",
                5,
                false,
                9,
                Err(ResponseError::StaleMemberEpoch),
            ),
            (
                "unknown member",
                "x",
                4,
                false,
                9,
                Err(ResponseError::UnknownMemberId),
            ),
            (
                "old version",
                "a",
                4,
                false,
                8,
                Err(ResponseError::UnsupportedVersion),
            ),
            ("old version, transactional", "a", 4, true, 3, Ok(())),
            (
                "admin commit to a group with members",
                "",
                -1,
                false,
                9,
                Err(ResponseError::UnknownMemberId),
            ),
        ];
        for (name, member, epoch, txn, version, expected) in cases {
            assert_eq!(
                group.validate_offset_commit(member, epoch, txn, version),
                expected,
                "{name}"
            );
        }
        assert_eq!(
            ConsumerGroup::new("g").validate_offset_commit("", -1, false, 9),
            Ok(()),
            "admin commit to an empty group"
        );
    }

    /// Regression test: a TxnOffsetCommit at a stale epoch answered STALE_MEMBER_EPOCH,
    /// which a transactional producer does not treat as an abortable commit failure; Kafka
    /// answers ILLEGAL_GENERATION on the transactional path only.
    #[test]
    fn txn_commits_at_a_stale_epoch_are_an_illegal_generation() {
        let group = group();
        let cases = [
            ("current epoch", "a", 4, Ok(())),
            ("stale epoch", "a", 3, Err(ResponseError::IllegalGeneration)),
            (
                "future epoch",
                "a",
                5,
                Err(ResponseError::IllegalGeneration),
            ),
            (
                "unknown member",
                "x",
                4,
                Err(ResponseError::UnknownMemberId),
            ),
        ];
        for (name, member, epoch, expected) in cases {
            assert_eq!(
                group.validate_txn_offset_commit(member, epoch),
                expected,
                "{name}"
            );
        }
        assert_eq!(
            ConsumerGroup::new("g").validate_txn_offset_commit("", -1),
            Ok(()),
            "a txn commit without a member to an empty group"
        );
        // The plain commit path keeps STALE_MEMBER_EPOCH.
        assert_eq!(
            group.validate_offset_commit("a", 3, false, 9),
            Err(ResponseError::StaleMemberEpoch)
        );
    }

    #[test]
    fn fetches_by_a_member_need_its_current_epoch() {
        let group = group();
        assert_eq!(group.validate_offset_fetch(None, -1), Ok(()));
        assert_eq!(group.validate_offset_fetch(Some("a"), 4), Ok(()));
        assert_eq!(
            group.validate_offset_fetch(Some("a"), 3),
            Err(ResponseError::StaleMemberEpoch)
        );
        assert_eq!(
            group.validate_offset_fetch(Some("x"), 4),
            Err(ResponseError::UnknownMemberId)
        );
        assert_eq!(
            group.validate_offset_fetch(None, 4),
            Err(ResponseError::UnknownMemberId)
        );
    }
}
