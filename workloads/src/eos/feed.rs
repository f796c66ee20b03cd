//! The eos process's feeder (part of [`EosClient`]): an idempotent producer that writes the
//! pipeline's input values, one `feed` op each, recorded with the offsets they were
//! acknowledged at.

use super::*;

impl EosClient {
    /// Sends `values` (partition, value) to the input topic and records the op.
    pub(super) async fn feed(
        &mut self,
        values: Vec<(i32, i64)>,
    ) -> Result<Completion, RecordError> {
        let mut sends: Vec<ProducedSend> = values
            .iter()
            .map(|(partition, value)| {
                self.feed_seq += 1;
                ProducedSend::invoked(self.feed_seq, i64::from(*partition), *value)
            })
            .collect();
        let invoke = ProduceValue {
            sends: sends.clone(),
        };
        self.record(OpType::Invoke, Function::Produce, invoke.to_json(), None)?;
        if self.feeder.is_none() {
            match Producer::from_properties(
                properties(&self.settings.producer).chain([("enable.idempotence", "true")]),
            ) {
                Ok(p) => self.feeder = Some(p),
                Err(error) => {
                    for send in &mut sends {
                        send.outcome = Some(SendOutcome::Fail);
                        send.error = Some(error.to_string());
                    }
                    let value = ProduceValue { sends };
                    self.record(OpType::Fail, Function::Produce, value.to_json(), None)?;
                    return Ok(Completion::Fail);
                }
            }
        }
        let feeder = self.feeder.as_ref().expect("just created");
        let timeout = self.settings.send_timeout;
        let mut pending = Vec::new();
        for send in &sends {
            let record =
                ProducerRecord::new(self.settings.input_topic.clone(), send.value.to_string())
                    .with_partition(send.key as i32);
            pending.push((
                Instant::now(),
                tokio::time::timeout(timeout, feeder.send(record)).await,
            ));
        }
        for (send, (started, submitted)) in sends.iter_mut().zip(pending) {
            let delivered = match submitted {
                Err(_) => Err((
                    "send() blocked past the timeout".to_owned(),
                    Certainty::Definite,
                )),
                Ok(Err(error)) => Err((error.to_string(), Certainty::Definite)),
                Ok(Ok(delivery)) => match tokio::time::timeout(timeout, delivery).await {
                    Err(_) => Err((
                        "no acknowledgement in time".to_owned(),
                        Certainty::Indefinite,
                    )),
                    Ok(Err(error)) => {
                        let certainty = error.certainty;
                        Err((error.to_string(), certainty))
                    }
                    Ok(Ok(metadata)) => Ok(metadata),
                },
            };
            send.latency_us = Some(started.elapsed().as_micros() as u64);
            match delivered {
                Ok(metadata) => {
                    send.outcome = Some(SendOutcome::Ok);
                    send.offset = metadata.offset.map(|o| o.0);
                    send.attempts = Some(metadata.attempts);
                }
                Err((error, certainty)) => {
                    send.outcome = Some(match certainty {
                        Certainty::Definite => SendOutcome::Fail,
                        Certainty::Indefinite => SendOutcome::Info,
                    });
                    send.error = Some(error);
                }
            }
        }
        let any_info = sends.iter().any(|s| s.outcome == Some(SendOutcome::Info));
        let all_ok = sends.iter().all(|s| s.outcome == Some(SendOutcome::Ok));
        let value = ProduceValue { sends }.to_json();
        if all_ok {
            self.record(OpType::Ok, Function::Produce, value, None)?;
            Ok(Completion::Ok)
        } else if any_info {
            self.record(OpType::Info, Function::Produce, value, None)?;
            Ok(Completion::Info)
        } else {
            self.record(OpType::Fail, Function::Produce, value, None)?;
            Ok(Completion::Fail)
        }
    }
}
