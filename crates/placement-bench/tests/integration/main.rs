//! placement-bench's integration tests, one binary: the binary end to end,
//! the FGD reproduction on the public trace, placement quality on seeded
//! synthetic fleets and the queue replay.

mod cli;
mod openb;
mod quality;
mod queue;
