//! The hash-chained, signable session log and the redaction funnel.
#![forbid(unsafe_code)]
