//! The shared vocabulary at the bottom of ratelab: tables, charts, units, link limits
//! and the keys items are compared by. Workloads, analysis, the runner and the reports all speak it,
//! and it imports none of them, so no import runs back up the layers.

pub mod chart;
pub mod command_end;
pub mod exposure;
pub mod group;
pub mod limit;
pub mod summary_line;
pub mod table;
pub mod text;
pub mod units;
pub mod width;

pub use chart::{Chart, Line};
pub use command_end::CommandEnd;
pub use exposure::Exposure;
pub use group::{GroupKey, ProfileFigure, RateUnit, Samples};
pub use limit::LinkLimit;
pub use summary_line::{SummaryLine, Unmeasured};
pub use table::Table;
