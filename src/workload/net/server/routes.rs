//! Data connections on their way to their test: each presents the cookie its test
//! announced, and is handed over only if it comes from that test's client.

use super::closed::Closed;
use super::{Arrival, State};

/// Hands a data connection to the test its cookie names, if it comes from that test's
/// client.
pub(in crate::workload::net) fn route(
    state: &State,
    cookie: &str,
    arrival: Arrival,
) -> Result<(), Closed> {
    let route = state
        .routes()
        .get(cookie)
        .map(|route| (route.to.clone(), route.client));
    let stream = arrival.stream;
    match route {
        Some((_, client)) if client != arrival.peer => Err(Closed::DataElsewhere(client)),
        Some((to, _)) => to.send(arrival).map_err(|_| Closed::DataTooLate(stream)),
        None => Err(Closed::DataForNoTest),
    }
}
