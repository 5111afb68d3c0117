//! The world catches planted bugs in a direct hand-over's sides: a payee that reports more received
//! than it verified, and a payer that does not withdraw its change request when it abandons.

use specie_offline::KeyRing;
use specie_offline_authority::OfflineAuthority;
use specie_offline_device::{Device, HandOverError, HandOverMessage, HandOverSide, PayeeHandOver, PayerHandOver, Step};

use super::hand_over::Sides;
use super::{authority_keys, run_world, OfflineOptions};
use crate::world::Violation;

/// The real payee, except that a finished hand-over reports one more received than it took.
struct Overstates(PayeeHandOver);

impl HandOverSide for Overstates {
    fn on_message(
        &mut self,
        device: &mut Device,
        message: HandOverMessage,
        ring: &KeyRing,
        fresh_nonce: [u8; 16],
        now_ms: u64,
    ) -> Result<Step, HandOverError> {
        match self.0.on_message(device, message, ring, fresh_nonce, now_ms)? {
            Step::Finish(last, mut handed_over) => {
                handed_over.received += 1;
                Ok(Step::Finish(last, handed_over))
            }
            step => Ok(step),
        }
    }

    fn abandon(&self, device: &mut Device) {
        self.0.abandon(device);
    }
}

/// The real payer, except that it abandons without withdrawing its change request.
struct KeepsItsRequest(PayerHandOver);

impl HandOverSide for KeepsItsRequest {
    fn on_message(
        &mut self,
        device: &mut Device,
        message: HandOverMessage,
        ring: &KeyRing,
        fresh_nonce: [u8; 16],
        now_ms: u64,
    ) -> Result<Step, HandOverError> {
        self.0.on_message(device, message, ring, fresh_nonce, now_ms)
    }

    fn abandon(&self, _device: &mut Device) {}
}

/// The first violation over the first 40 seeds with these hand-over sides.
fn first_violation(sides: Sides) -> Option<Violation> {
    (0..40).find_map(|seed| {
        let authority = || OfflineAuthority::new(authority_keys());
        run_world(OfflineOptions::from_seed(seed), authority, sides).err()
    })
}

#[test]
fn the_world_catches_a_payee_that_reports_more_than_it_verified() {
    let sides = Sides {
        payee: |side| Box::new(Overstates(side)),
        payer: |side| Box::new(side),
    };
    let violation = first_violation(sides).expect("some seed catches the planted bug");
    assert!(violation.message.contains("reports"), "{violation}");
}

#[test]
fn the_world_catches_a_payer_that_keeps_its_change_request_on_abandon() {
    let sides = Sides {
        payee: |side| Box::new(side),
        payer: |side| Box::new(KeepsItsRequest(side)),
    };
    let violation = first_violation(sides).expect("some seed catches the planted bug");
    assert!(violation.message.contains("a request left open"), "{violation}");
}
