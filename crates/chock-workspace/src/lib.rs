//! The throwaway workspace: git and overlay backings, diff review, audited apply and undo.
#![forbid(unsafe_code)]
