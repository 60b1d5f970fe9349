//! Identity tracking of creations: which objects this controller created,
//! and which of them the informer has shown it.

use std::collections::HashMap;

/// How many observations of unknown objects one tracked expectation keeps
/// while waiting for a matching [`record_creation`] (the watch event for a
/// new object can arrive before the create call returns). Observations
/// beyond this are ignored; if one of them was ours, that creation is
/// counted as lost when the expectation expires.
///
/// [`record_creation`]: crate::ControllerExpectations::record_creation
pub const MAX_UNMATCHED_OBSERVATIONS: usize = 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The controller created it; the informer has not shown it yet.
    Recorded,
    /// The informer showed it; the controller has not (yet) said it is ours.
    Unmatched,
    /// Both happened, and the add counter was lowered once for it.
    Counted,
}

/// Per-expectation identity state. Each id moves at most once into
/// `Counted`, which is what makes counting exact under duplicate events.
#[derive(Debug, Clone, Default)]
pub(crate) struct CreationTracker {
    states: HashMap<String, State>,
    unmatched: usize,
}

impl CreationTracker {
    /// The controller created `id`. Returns `true` when the creation should
    /// be counted now (the informer had already shown it).
    pub(crate) fn record(&mut self, id: &str) -> bool {
        match self.states.get_mut(id) {
            None => {
                self.states.insert(id.to_owned(), State::Recorded);
                false
            }
            Some(state @ State::Unmatched) => {
                *state = State::Counted;
                self.unmatched -= 1;
                true
            }
            Some(State::Recorded | State::Counted) => false,
        }
    }

    /// The informer showed `id`. Returns `true` when the creation should be
    /// counted now (the controller had recorded it).
    pub(crate) fn observe(&mut self, id: &str) -> bool {
        match self.states.get_mut(id) {
            Some(state @ State::Recorded) => {
                *state = State::Counted;
                true
            }
            Some(State::Unmatched | State::Counted) => false,
            None => {
                if self.unmatched < MAX_UNMATCHED_OBSERVATIONS {
                    self.states.insert(id.to_owned(), State::Unmatched);
                    self.unmatched += 1;
                } else {
                    tracing::debug!(
                        id,
                        "too many unmatched creation observations; ignoring this one"
                    );
                }
                false
            }
        }
    }

    /// Ids recorded as created and not yet observed, sorted.
    pub(crate) fn outstanding(&self) -> Vec<String> {
        let mut ids: Vec<String> = self
            .states
            .iter()
            .filter(|(_, state)| **state == State::Recorded)
            .map(|(id, _)| id.clone())
            .collect();
        ids.sort_unstable();
        ids
    }
}
