//! Priorities (controller-runtime's priority queue semantics): higher
//! first, FIFO within a priority, raising a waiting item, never lowering.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::settle;
use ctrlkit_workqueue::WorkQueue;

fn drain(queue: &WorkQueue<&'static str>) -> Vec<&'static str> {
    let mut out = Vec::new();
    while let Some(item) = queue.try_get() {
        queue.done(&item);
        out.push(item);
    }
    out
}

#[test]
fn higher_priorities_first_fifo_within_a_priority() {
    let queue = WorkQueue::new();
    queue.add("a0");
    queue.add_with_priority("b-1", -1);
    queue.add_with_priority("c5", 5);
    queue.add("d0");
    queue.add_with_priority("e5", 5);
    queue.add_with_priority("f1", 1);
    assert_eq!(queue.len(), 6);
    assert_eq!(drain(&queue), ["c5", "e5", "f1", "a0", "d0", "b-1"]);
}

#[test]
fn re_adding_with_a_higher_priority_raises_the_item() {
    let queue = WorkQueue::new();
    queue.add("a");
    queue.add("b");
    queue.add("c");
    queue.add_with_priority("c", 3);
    assert_eq!(queue.len(), 3, "raised, not duplicated");
    assert_eq!(drain(&queue), ["c", "a", "b"]);
}

#[test]
fn a_raised_item_keeps_its_add_order_among_its_new_peers() {
    let queue = WorkQueue::new();
    queue.add_with_priority("x", 0); // added first
    queue.add_with_priority("y", 2);
    queue.add_with_priority("x", 2); // raised later, but added earlier
    assert_eq!(drain(&queue), ["x", "y"]);

    queue.add_with_priority("p", 1);
    queue.add_with_priority("q", 4);
    queue.add_with_priority("p", 4);
    queue.add_with_priority("p", 7);
    assert_eq!(drain(&queue), ["p", "q"]);
}

#[test]
fn re_adding_with_a_lower_priority_changes_nothing() {
    let queue = WorkQueue::new();
    queue.add_with_priority("a", 5);
    queue.add_with_priority("b", 3);
    queue.add_with_priority("a", 1);
    queue.add("a");
    assert_eq!(queue.len(), 2);
    assert_eq!(drain(&queue), ["a", "b"]);
}

#[test]
fn negative_priority_raised_to_zero_keeps_its_place_among_zeros() {
    let queue = WorkQueue::new();
    queue.add_with_priority("low", -3);
    queue.add("mid");
    queue.add("low");
    assert_eq!(drain(&queue), ["low", "mid"]);
}

#[test]
fn requeue_after_processing_uses_the_highest_priority_added_meanwhile() {
    let queue = WorkQueue::new();
    queue.add("busy");
    let busy = queue.try_get().unwrap();
    queue.add("other");
    queue.add_with_priority("busy", 2);
    queue.add_with_priority("busy", 1);
    queue.done(&busy);
    assert_eq!(drain(&queue), ["busy", "other"]);
}

#[tokio::test(start_paused = true)]
async fn delayed_items_carry_their_priority() {
    let queue = WorkQueue::new();
    queue.add_after_with_priority("late-high", Duration::from_millis(10), 9);
    queue.add_after("late-low", Duration::from_millis(5));
    queue.add_after_with_priority("late-low", Duration::from_millis(50), 4);
    queue.add("now");
    tokio::time::advance(Duration::from_millis(20)).await;
    settle().await;
    // Both fired; "late-low" kept its earlier time and took the higher
    // priority of the two requests.
    assert_eq!(drain(&queue), ["late-high", "late-low", "now"]);
}

#[tokio::test(start_paused = true)]
async fn parked_gets_receive_the_highest_priority_item() {
    let queue = WorkQueue::<u32>::new();
    queue.add(1);
    let first = queue.get().await.unwrap();
    queue.add_with_priority(2, -5);
    queue.add_with_priority(3, 5);
    assert_eq!(queue.get().await, Some(3));
    assert_eq!(queue.get().await, Some(2));
    queue.done(&first);
}

#[test]
fn mixing_priorities_over_many_rounds_keeps_the_count_right() {
    let queue = WorkQueue::<u32>::new();
    for round in 0..50u32 {
        for i in 0..20u32 {
            queue.add_with_priority(i, ((i + round) % 5) as i32 - 2);
        }
        for i in 0..20u32 {
            queue.add_with_priority(i, (i % 7) as i32);
        }
        assert_eq!(queue.len(), 20);
        let mut last = i32::MAX;
        let mut seen = 0;
        while let Some(item) = queue.try_get() {
            let priority = (item % 7) as i32;
            let first = ((item + round) % 5) as i32 - 2;
            let effective = priority.max(first);
            assert!(effective <= last, "priorities must not increase");
            last = effective;
            queue.done(&item);
            seen += 1;
        }
        assert_eq!(seen, 20);
    }
}

#[test]
fn raising_twice_from_below_zero_leaves_a_single_copy() {
    // -1 → 0 → 3: the copy must move each time, never be duplicated.
    let queue = WorkQueue::new();
    queue.add_with_priority("x", -1);
    queue.add("y");
    queue.add_with_priority("x", 0);
    queue.add_with_priority("x", 3);
    assert_eq!(queue.len(), 2);
    assert_eq!(drain(&queue), ["x", "y"]);
    assert_eq!(queue.try_get(), None);
}
