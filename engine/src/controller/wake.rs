//! A wake-up for the controller's tasks that needs no runtime: [`Notify`] is tokio's `Notify` on one thread
//! (`notify_one` wakes the oldest waiter, or leaves one permit for the next `notified`), so the service's tasks wait
//! for the state machine's decisions (a request taken, an admission granted) whatever executor runs them, and wake
//! in the order they began to wait.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

/// One-permit notification on one thread.
#[derive(Debug, Default)]
pub struct Notify {
    state: RefCell<State>,
}

#[derive(Debug, Default)]
struct State {
    /// A `notify_one` with nobody waiting: the next `notified` completes at once.
    permit: bool,
    /// Waiters in the order they began to wait: their id and their waker.
    waiters: VecDeque<(u64, Waker)>,
    /// Waiters notified and not yet polled to completion.
    notified: Vec<u64>,
    next_id: u64,
}

impl Notify {
    pub fn new() -> Notify {
        Notify::default()
    }

    /// Wakes the oldest waiter; with none, stores one permit (several calls store one).
    pub fn notify_one(&self) {
        let waker = {
            let mut state = self.state.borrow_mut();
            match state.waiters.pop_front() {
                Some((id, waker)) => {
                    state.notified.push(id);
                    Some(waker)
                }
                None => {
                    state.permit = true;
                    None
                }
            }
        };
        // Woken outside the borrow: the waker may poll nothing, but a waker of a test's executor may run at once.
        if let Some(waker) = waker {
            waker.wake();
        }
    }

    /// Completes at the next `notify_one` (at once when a permit is stored).
    pub fn notified(&self) -> Notified<'_> {
        Notified { notify: self, id: None, done: false }
    }
}

/// The future of [`Notify::notified`].
#[derive(Debug)]
pub struct Notified<'a> {
    notify: &'a Notify,
    id: Option<u64>,
    done: bool,
}

impl Future for Notified<'_> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let mut state = this.notify.state.borrow_mut();
        match this.id {
            None if state.permit => {
                state.permit = false;
                this.done = true;
                Poll::Ready(())
            }
            None => {
                let id = state.next_id;
                state.next_id += 1;
                state.waiters.push_back((id, cx.waker().clone()));
                this.id = Some(id);
                Poll::Pending
            }
            Some(id) => {
                if let Some(index) = state.notified.iter().position(|notified| *notified == id) {
                    state.notified.swap_remove(index);
                    this.done = true;
                    return Poll::Ready(());
                }
                if let Some(waiter) = state.waiters.iter_mut().find(|(waiting, _)| *waiting == id) {
                    waiter.1.clone_from(cx.waker());
                }
                Poll::Pending
            }
        }
    }
}

impl Drop for Notified<'_> {
    /// A waiter that goes away is no longer waiting; one that was notified and never saw it passes the
    /// notification on, so no `notify_one` is lost.
    fn drop(&mut self) {
        let (Some(id), false) = (self.id, self.done) else { return };
        let pass_on = {
            let mut state = self.notify.state.borrow_mut();
            state.waiters.retain(|(waiting, _)| *waiting != id);
            match state.notified.iter().position(|notified| *notified == id) {
                Some(index) => {
                    state.notified.swap_remove(index);
                    true
                }
                None => false,
            }
        };
        if pass_on {
            self.notify.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(future: &mut Pin<&mut Notified<'_>>, waker: &Waker) -> bool {
        future.as_mut().poll(&mut Context::from_waker(waker)).is_ready()
    }

    #[test]
    fn a_permit_completes_the_next_wait_once_and_several_notifies_store_one() {
        let notify = Notify::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        notify.notify_one();
        notify.notify_one();
        let mut first = std::pin::pin!(notify.notified());
        assert!(poll(&mut first, &waker), "the stored permit");
        let mut second = std::pin::pin!(notify.notified());
        assert!(!poll(&mut second, &waker), "one permit, not two");
    }

    #[test]
    fn waiters_wake_oldest_first_and_only_the_notified_one_completes() {
        let notify = Notify::new();
        let (a, b) = (Arc::new(Count(AtomicUsize::new(0))), Arc::new(Count(AtomicUsize::new(0))));
        let (waker_a, waker_b) = (Waker::from(a.clone()), Waker::from(b.clone()));
        let mut first = std::pin::pin!(notify.notified());
        let mut second = std::pin::pin!(notify.notified());
        assert!(!poll(&mut first, &waker_a));
        assert!(!poll(&mut second, &waker_b));
        notify.notify_one();
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 0), "the oldest waiter is woken");
        assert!(!poll(&mut second, &waker_b), "the younger one still waits");
        assert!(poll(&mut first, &waker_a));
    }

    #[test]
    fn a_notified_waiter_dropped_before_it_saw_it_passes_the_notification_on() {
        let notify = Notify::new();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut first = Box::pin(notify.notified());
        let mut second = std::pin::pin!(notify.notified());
        assert!(!first.as_mut().poll(&mut Context::from_waker(&waker)).is_ready());
        assert!(!poll(&mut second, &waker));
        notify.notify_one();
        drop(first);
        assert!(poll(&mut second, &waker), "the notification went to the next waiter");
        let mut third = std::pin::pin!(notify.notified());
        assert!(!poll(&mut third, &waker), "and was not kept as a permit too");
    }
}
