//! Waiting on several partitions' change signals at once: a long-polling fetch or a parked
//! acks=all produce wakes when any of its partitions signals a change that could complete it
//! (`replication::wakes`), or when the metadata image changes.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;

use tokio::sync::watch;

use crate::metadata::MetadataImage;

/// Waits until one of `signals` changes or `image` does. Returns `false` when the image's
/// sender is gone (the node is stopping); a partition signal whose sender is gone counts as a
/// change, so the caller looks again.
pub async fn any_change(
    signals: &mut [watch::Receiver<u64>],
    image: &mut watch::Receiver<Arc<MetadataImage>>,
) -> bool {
    type Changed<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;
    let mut waiting: Vec<Changed<'_>> = signals
        .iter_mut()
        .map(|signal| {
            Box::pin(async move {
                let _ = signal.changed().await;
            }) as Changed<'_>
        })
        .collect();
    let partitions = std::future::poll_fn(|cx| {
        if waiting
            .iter_mut()
            .any(|changed| changed.as_mut().poll(cx).is_ready())
        {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    });
    tokio::select! {
        () = partitions => true,
        changed = image.changed() => changed.is_ok(),
    }
}
