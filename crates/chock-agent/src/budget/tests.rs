//! The account: admission, charges, slices for children, and the account rebuilt from a log.

use super::*;

const PRICE: TokenPrice = TokenPrice {
    input: 3e-6,
    output: 15e-6,
};

#[test]
fn a_call_outside_the_turns_counts_but_leaves_the_next_turns_admission_where_it_was() {
    let budget = Budget::new(BudgetAmount {
        usd: None,
        tokens: Some(5000),
    });
    budget.charge(1000, 0, None);
    // The reviewer's small call: 10 tokens spent, the conversation still 1,000 tokens long.
    budget.charge_aside(10, 0, None);
    assert_eq!(budget.left().tokens, Some(3990));
    let admitted = budget.admit("m", 0, 16_000, None).unwrap();
    assert_eq!(
        admitted.max_output_tokens,
        3990 - 1000,
        "the next turn is admitted as at least as long as the last turn's input"
    );
    // The same account rebuilt from the log: the reviewer's reply is a `model.response` of
    // turn 0.
    use chock_log::EventKind;
    let reply = |seq, turn, input| {
        event(
            seq,
            EventKind::ModelResponse,
            serde_json::json!({"turn": turn, "model": "m", "stop_reason": "end_turn",
                "content": [], "usage": {"input_tokens": input, "output_tokens": 0},
                "cost_usd": null}),
        )
    };
    let events = vec![
        event(
            1,
            EventKind::Note,
            serde_json::json!({"about": "budget", "limit": {"tokens": 5000}}),
        ),
        reply(2, 1, 1000),
        reply(3, 0, 10),
    ];
    let resumed = Budget::from_log(&events, None);
    assert_eq!(resumed.left().tokens, Some(3990));
    assert_eq!(
        resumed
            .admit("m", 0, 16_000, None)
            .unwrap()
            .max_output_tokens,
        3990 - 1000
    );
}

#[test]
fn a_call_that_would_exceed_the_tokens_left_is_refused_and_its_output_capped() {
    let budget = Budget::new(BudgetAmount {
        usd: None,
        tokens: Some(1000),
    });
    let admitted = budget.admit("m", 100, 16_000, None).unwrap();
    assert_eq!(admitted.max_output_tokens, 900);
    budget.charge(600, 10, None);
    // The next call carries at least the 600 the last one did.
    let err = budget.admit("m", 50, 16_000, None).unwrap_err();
    assert!(matches!(err, BudgetError::Exhausted { .. }), "{err}");
}

#[test]
fn a_dollar_budget_needs_a_price_and_caps_the_reply() {
    let budget = Budget::new(BudgetAmount {
        usd: Some(0.01),
        tokens: None,
    });
    assert!(matches!(
        budget.admit("m", 10, 100, None),
        Err(BudgetError::Unpriced { .. })
    ));
    // $0.01 - 1000 * $3e-6 = $0.007: 466 output tokens at $15e-6.
    let admitted = budget.admit("m", 1000, 16_000, Some(PRICE)).unwrap();
    assert_eq!(admitted.max_output_tokens, 466);
}

fn event(seq: u64, kind: chock_log::EventKind, data: serde_json::Value) -> Event {
    Event {
        seq,
        ts: String::new(),
        kind,
        call_id: None,
        prev: String::new(),
        data,
    }
}

#[test]
fn a_resumed_account_keeps_a_slice_whose_end_was_never_recorded() {
    use chock_log::EventKind;
    use serde_json::json;
    let events = vec![
        event(
            1,
            EventKind::Note,
            json!({"about": "budget", "limit": {"tokens": 10000}}),
        ),
        event(
            2,
            EventKind::ModelResponse,
            json!({"turn": 1, "model": "m", "id": "r", "stop_reason": "tool_use", "content": [],
                "usage": {"input_tokens": 900, "output_tokens": 100, "cache_read_tokens": 0,
                "cache_write_tokens": 0}, "cost_usd": null}),
        ),
        event(
            3,
            EventKind::SessionSpawn,
            json!({"child": "c1", "task": "t", "budget": {"tokens": 3000}}),
        ),
        event(
            4,
            EventKind::AgentComplete,
            json!({"summary": "", "child": "c1", "ended": "done", "spent": {"tokens": 1000}}),
        ),
        event(
            5,
            EventKind::SessionSpawn,
            json!({"child": "c2", "task": "t", "budget": {"tokens": 4000}}),
        ),
    ];
    let budget = Budget::from_log(&events, None);
    assert_eq!(budget.limit().tokens, Some(10000));
    // 10000 - 1000 own - 1000 spent by c1 - 4000 still promised to c2.
    assert_eq!(budget.left().tokens, Some(4000));
    assert_eq!(spent_in_log(&events).tokens, Some(6000));
    assert_eq!(budget.children().len(), 1);
}

#[test]
fn a_slice_is_reserved_and_what_the_child_left_returns() {
    let budget = Budget::new(BudgetAmount {
        usd: None,
        tokens: Some(10_000),
    });
    budget.charge(1000, 0, None);
    let slice = budget.slice_for(BudgetAmount::default()).unwrap();
    assert_eq!(slice.tokens, Some(4500));
    budget.reserve("c1", slice);
    assert_eq!(budget.left().tokens, Some(4500));
    assert!(matches!(
        budget.slice_for(BudgetAmount {
            usd: None,
            tokens: Some(5000)
        }),
        Err(BudgetError::SliceTooLarge { .. })
    ));
    budget.settle(
        "c1",
        BudgetAmount {
            usd: None,
            tokens: Some(1200),
        },
        ChildEnd::Done,
    );
    assert_eq!(budget.children().len(), 1);
    assert_eq!(budget.left().tokens, Some(7800));
}

#[test]
fn an_unpriced_call_makes_the_dollars_spent_unknown_never_zero() {
    let budget = Budget::new(BudgetAmount::default());
    budget.charge(100, 10, Some(0.5));
    assert_eq!(budget.spent().usd, Some(0.5));
    budget.charge(100, 10, None);
    assert_eq!(
        budget.spent(),
        BudgetAmount {
            usd: None,
            tokens: Some(220)
        }
    );
    // A parent whose child had no price: the child's cost and the parent's total are unknown.
    let parent = Budget::new(BudgetAmount::default());
    parent.charge(10, 1, Some(0.25));
    parent.reserve("c", BudgetAmount::default());
    parent.settle("c", budget.spent(), ChildEnd::Done);
    assert_eq!(parent.children()[0].cost_usd, None);
    assert_eq!(parent.spent().usd, None);
    // As a child's log says it: the `model.response` without a price.
    use chock_log::EventKind;
    let events = vec![event(
        1,
        EventKind::ModelResponse,
        serde_json::json!({"turn": 1, "model": "m", "stop_reason": "end_turn",
            "content": [], "usage": {"input_tokens": 100, "output_tokens": 10},
            "cost_usd": null}),
    )];
    assert_eq!(spent_in_log(&events).usd, None);
    assert_eq!(spent_in_log(&events).tokens, Some(110));
}
