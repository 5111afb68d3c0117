//! Every demo's last step: the platform's supply report, what `specie audit supply` prints, from
//! the ledger of record's cut at the end of the run (`GET /v1/supply`'s body) and the modes' own
//! books, set beside the demo's own audit. Both must hold, and they must agree.

use secp256k1::Keypair;
use specie_api::http_api::SupplyBody;
use specie_api::supply::{ModeBooks, SupplyReport};
use specie_transaction::signing::xonly_bytes;

/// What the demo's own audit counted, in the report's terms.
pub(crate) struct DemoFigures {
    /// The demo's issuer key (hex, x-only), what it minted and redeemed.
    pub(crate) issuer: String,
    pub(crate) minted: u128,
    pub(crate) redeemed: u128,
    /// The value of the core's unspent transparent outputs the demo's wallets hold.
    pub(crate) core_outputs: u128,
    /// The value of the confidential and anonymous notes the demo's wallets hold.
    pub(crate) hidden_notes: u128,
}

impl DemoFigures {
    pub(crate) fn new(issuer: &Keypair, minted: u128, redeemed: u128, core_outputs: u128, hidden_notes: u128) -> Self {
        DemoFigures {
            issuer: hex::encode(xonly_bytes(issuer)),
            minted,
            redeemed,
            core_outputs,
            hidden_notes,
        }
    }
}

pub(crate) struct SupplyCheck {
    pub(crate) report: SupplyReport,
    /// The report's figures are the demo's, and every mode's books were read.
    pub(crate) agrees_with_demo: bool,
}

/// What `cut` says `issuer` minted and redeemed (0 and 0 if it names no such issuer).
fn issuer_flow(cut: &SupplyBody, issuer: &str) -> (u128, u128) {
    let number = |text: &str| text.parse::<u128>().unwrap_or(u128::MAX);
    cut.issuers
        .iter()
        .find(|each| each.key == issuer)
        .map_or((0, 0), |each| (number(&each.minted), number(&each.redeemed)))
}

impl SupplyCheck {
    /// `before`: the cut when the demo began, if the ledger may hold more than the demo did (a
    /// cluster others use): then only what the demo's issuer minted and redeemed since is
    /// compared. Without it the demo is the ledger's only user, and every figure is compared.
    pub(crate) fn new(
        before: Option<&SupplyBody>,
        cut: SupplyBody,
        books: Vec<ModeBooks>,
        demo: &DemoFigures,
    ) -> SupplyCheck {
        let (minted, redeemed) = issuer_flow(&cut, &demo.issuer);
        let (minted_before, redeemed_before) = before.map_or((0, 0), |b| issuer_flow(b, &demo.issuer));
        let issuer_agrees = minted.checked_sub(minted_before) == Some(demo.minted)
            && redeemed.checked_sub(redeemed_before) == Some(demo.redeemed);
        let totals_agree = before.is_some()
            || (cut.issued == (demo.minted - demo.redeemed).to_string()
                && cut.core_outputs == demo.core_outputs.to_string()
                && cut.hidden_notes == demo.hidden_notes.to_string());
        let report = SupplyReport::reconcile(cut, books);
        let agrees_with_demo = issuer_agrees && totals_agree && report.every_mode_checked();
        SupplyCheck {
            report,
            agrees_with_demo,
        }
    }

    pub(crate) fn ok(&self) -> bool {
        self.report.ok && self.agrees_with_demo
    }

    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::json!({ "report": self.report, "agrees_with_demo": self.agrees_with_demo })
    }

    pub(crate) fn print(&self) {
        println!("the supply report (as `specie audit supply` prints it):");
        for line in self.report.lines() {
            println!("  {line}");
        }
        println!(
            "  it {} the demo's own audit",
            if self.agrees_with_demo {
                "agrees with"
            } else {
                "DOES NOT AGREE with"
            }
        );
    }
}
