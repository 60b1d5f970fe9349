//! Property tests of the rate limiters' delay sequences.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use ctrlkit_workqueue::rate_limiter::{
    BucketRateLimiter, ItemExponentialFailureRateLimiter, ItemFastSlowRateLimiter,
    MaxOfRateLimiter, RateLimiter, WithMaxWaitRateLimiter,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn exponential_doubles_until_the_cap_and_forget_restarts(
        base_ns in 0u64..10_000_000_000,
        max_ns in 0u64..u64::MAX,
        calls in 1usize..300,
    ) {
        let (base, max) = (Duration::from_nanos(base_ns), Duration::from_nanos(max_ns));
        let limiter = ItemExponentialFailureRateLimiter::new(base, max);
        let delays: Vec<_> = (0..calls).map(|_| limiter.when(&"k")).collect();
        prop_assert_eq!(delays[0], base.min(max));
        for (n, pair) in delays.windows(2).enumerate() {
            prop_assert!(pair[0] <= pair[1], "not monotone at {}: {:?}", n, pair);
            // Exact doubling while far from the cap and from f64 precision.
            let next = (n < 40).then(|| u128::from(base_ns) << (n + 1));
            if let Some(next) = next.filter(|&next| next < u128::from(max_ns) && next < 1 << 53) {
                prop_assert_eq!(pair[1].as_nanos(), next);
            }
        }
        prop_assert!(delays.iter().all(|d| *d <= max));
        prop_assert_eq!(limiter.num_requeues(&"k"), calls as u32);
        limiter.forget(&"k");
        prop_assert_eq!(limiter.num_requeues(&"k"), 0);
        prop_assert_eq!(limiter.when(&"k"), base.min(max));
    }

    #[test]
    fn fast_slow_switches_after_the_fast_attempts(fast_attempts in 0u32..20, calls in 1u32..60) {
        let (fast, slow) = (Duration::from_millis(1), Duration::from_secs(1));
        let limiter = ItemFastSlowRateLimiter::new(fast, slow, fast_attempts);
        for n in 1..=calls {
            let want = if n <= fast_attempts { fast } else { slow };
            prop_assert_eq!(limiter.when(&7u8), want);
        }
        prop_assert_eq!(limiter.num_requeues(&7u8), calls);
    }

    #[test]
    fn max_of_and_max_wait_combine_their_inner_limiters(
        fast_attempts in 0u32..5,
        cap_ms in 0u64..2_000,
        calls in 1usize..40,
    ) {
        let ms = Duration::from_millis(1);
        let parts = || (
            ItemFastSlowRateLimiter::new(3 * ms, 500 * ms, fast_attempts),
            ItemExponentialFailureRateLimiter::new(ms, Duration::from_secs(10)),
        );
        let (a, b) = parts();
        let (a2, b2) = parts();
        let combined = WithMaxWaitRateLimiter::new(
            MaxOfRateLimiter::new(vec![Box::new(a2), Box::new(b2)]),
            Duration::from_millis(cap_ms),
        );
        for _ in 0..calls {
            let want = a.when(&1u16).max(b.when(&1u16)).min(Duration::from_millis(cap_ms));
            prop_assert_eq!(combined.when(&1u16), want);
        }
        prop_assert_eq!(combined.num_requeues(&1u16), calls as u32);
    }
}

proptest! {
    // Runtimes are not free: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn bucket_reservations_at_one_instant_are_spaced_by_the_rate(
        qps in 0.5f64..5_000.0,
        burst in 1u32..200,
        extra in 0u32..50,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap();
        runtime.block_on(async {
            let limiter = BucketRateLimiter::new(qps, burst);
            for _ in 0..burst {
                prop_assert_eq!(RateLimiter::<()>::when(&limiter, &()), Duration::ZERO);
            }
            for k in 1..=extra {
                let got = RateLimiter::<()>::when(&limiter, &()).as_secs_f64();
                let want = f64::from(k) / qps;
                prop_assert!((got - want).abs() <= 1e-9 + want * 1e-12, "k={} got {} want {}", k, got, want);
            }
            Ok(())
        })?;
    }
}
