//! What the ledger's blocks did to the core's circulating supply, counted as they are applied:
//! per counterparty (each issuer, each mode funded from the core) the value that entered and
//! left circulation, the value of the unspent transparent outputs, and the value in notes whose
//! values are hidden (through their public inputs and outputs). Three tallies that no one
//! transaction can make disagree while every transaction balances: the supply report's check
//! (docs/operator-guide.md, "The supply report").

use specie_codec::{put_byte_vec, put_count, DecodeError, Reader};
use specie_transaction::{Counterparty, SpecieTransaction};

/// Counterparties a decoded [`Supply`] may name. A ledger names only those its core was
/// configured to accept (issuers, bridges, committees), so this is far above any real one.
pub const COUNTERPARTIES_MAX: usize = 4096;
/// The longest role name on the wire.
pub const ROLE_BYTES_MAX: usize = 32;

/// Value that entered core circulation from one counterparty, and value that left to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    pub entered: u128,
    pub left: u128,
}

/// One counterparty's flow, as the ledger counts it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CounterpartyFlow {
    /// What the key is: `issuer`, `bridge`, `fastpay_committee` (a capability's own).
    pub role: String,
    pub key: [u8; 32],
    pub flow: Flow,
}

/// The supply tallies of a ledger (see the module's doc).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Supply {
    /// In (role, key) order.
    counterparties: Vec<CounterpartyFlow>,
    /// Σ transparent outputs created − Σ transparent inputs spent: the value of the unspent
    /// transparent outputs.
    outputs: i128,
    /// Σ public inputs − Σ public outputs of the private kinds: the value in hidden notes.
    hidden: i128,
}

impl Supply {
    /// Counts one confirmed transaction.
    pub fn add(&mut self, transaction: &SpecieTransaction) {
        let created: u128 = transaction
            .outputs()
            .iter()
            .map(|output| u128::from(output.value))
            .sum();
        let spent: u128 = transaction
            .inputs()
            .iter()
            .map(|input| u128::from(input.data.value))
            .sum();
        self.outputs += created as i128 - spent as i128;
        let circulation = transaction.circulation();
        self.hidden += i128::from(circulation.hidden_in) - i128::from(circulation.hidden_out);
        if let Some(counterparty) = circulation.counterparty {
            let flow = self.flow_mut(counterparty);
            flow.entered += u128::from(circulation.entered);
            flow.left += u128::from(circulation.left);
        }
    }

    fn flow_mut(&mut self, counterparty: Counterparty) -> &mut Flow {
        let position = self
            .counterparties
            .binary_search_by(|each| (each.role.as_str(), &each.key).cmp(&(counterparty.role, &counterparty.key)));
        let index = match position {
            Ok(index) => index,
            Err(index) => {
                self.counterparties.insert(
                    index,
                    CounterpartyFlow {
                        role: counterparty.role.to_string(),
                        key: counterparty.key,
                        flow: Flow::default(),
                    },
                );
                index
            }
        };
        &mut self.counterparties[index].flow
    }

    /// Every counterparty's flow, in (role, key) order.
    pub fn counterparties(&self) -> &[CounterpartyFlow] {
        &self.counterparties
    }

    /// The value of the unspent transparent outputs.
    pub fn outputs(&self) -> i128 {
        self.outputs
    }

    /// The value in hidden notes (confidential and anonymous), from their public inputs and
    /// outputs.
    pub fn hidden(&self) -> i128 {
        self.hidden
    }

    /// Σ minted − Σ redeemed over every issuer.
    pub fn issued(&self) -> i128 {
        self.counterparties
            .iter()
            .filter(|each| each.role == Counterparty::ISSUER)
            .map(|each| each.flow.entered as i128 - each.flow.left as i128)
            .sum()
    }

    /// Σ entered − Σ left over every counterparty: what circulation the flows leave in the core.
    pub fn circulating(&self) -> i128 {
        self.counterparties
            .iter()
            .map(|each| each.flow.entered as i128 - each.flow.left as i128)
            .sum()
    }

    /// Whether the tallies agree: the outputs and the hidden notes hold exactly what the flows
    /// left in circulation, and neither is negative.
    pub fn balanced(&self) -> bool {
        self.outputs >= 0 && self.hidden >= 0 && self.outputs + self.hidden == self.circulating()
    }

    /// `count ‖ (role (byte vector) ‖ key ‖ entered (u128) ‖ left (u128))* ‖ outputs (i128) ‖
    /// hidden (i128)`, integers little-endian.
    pub(crate) fn encode_to(&self, out: &mut Vec<u8>) {
        put_count(out, self.counterparties.len());
        for each in &self.counterparties {
            put_byte_vec(out, each.role.as_bytes());
            out.extend_from_slice(&each.key);
            out.extend_from_slice(&each.flow.entered.to_le_bytes());
            out.extend_from_slice(&each.flow.left.to_le_bytes());
        }
        out.extend_from_slice(&self.outputs.to_le_bytes());
        out.extend_from_slice(&self.hidden.to_le_bytes());
    }

    pub(crate) fn decode_from(reader: &mut Reader<'_>) -> Result<Supply, DecodeError> {
        let count = reader.read_count("counterparties", COUNTERPARTIES_MAX as u64, 8 + 32 + 32)?;
        let mut counterparties: Vec<CounterpartyFlow> = Vec::with_capacity(count);
        for _ in 0..count {
            let role = reader.read_byte_vec("role", ROLE_BYTES_MAX as u64)?;
            let role = String::from_utf8(role.to_vec()).map_err(|_| DecodeError::NonCanonical {
                what: "supply",
                reason: "a role is not UTF-8",
            })?;
            let key: [u8; 32] = reader.read_array("counterparty key")?;
            let entered = u128::from_le_bytes(reader.read_array("entered")?);
            let left = u128::from_le_bytes(reader.read_array("left")?);
            if counterparties
                .last()
                .is_some_and(|last| (last.role.as_str(), &last.key) >= (role.as_str(), &key))
            {
                return Err(DecodeError::NonCanonical {
                    what: "supply",
                    reason: "counterparties not in increasing (role, key) order",
                });
            }
            counterparties.push(CounterpartyFlow {
                role,
                key,
                flow: Flow { entered, left },
            });
        }
        Ok(Supply {
            counterparties,
            outputs: i128::from_le_bytes(reader.read_array("outputs")?),
            hidden: i128::from_le_bytes(reader.read_array("hidden")?),
        })
    }

    /// The longest encoding a decoder accepts.
    pub(crate) fn encoded_bytes_max() -> usize {
        8 + COUNTERPARTIES_MAX * (8 + ROLE_BYTES_MAX + 32 + 32) + 32
    }
}

#[cfg(test)]
mod tests {
    use specie_codec::Reader;
    use specie_transaction::{Circulation, Counterparty};

    use super::*;

    fn counterparty(role: &'static str, key: u8) -> Counterparty {
        Counterparty { role, key: [key; 32] }
    }

    /// A model of the tallies: each operation moves value between the outside, the outputs and
    /// the hidden notes the way one kind of transaction does.
    #[test]
    fn flows_balance_when_every_transaction_does_and_not_when_one_creates_value() {
        let mut supply = Supply::default();
        let issuer = counterparty(Counterparty::ISSUER, 1);
        let bridge = counterparty(Counterparty::BRIDGE, 2);
        let add = |supply: &mut Supply, circulation: Circulation, outputs: i128| {
            let flow = circulation.counterparty.map(|c| supply.flow_mut(c));
            if let Some(flow) = flow {
                flow.entered += u128::from(circulation.entered);
                flow.left += u128::from(circulation.left);
            }
            supply.outputs += outputs;
            supply.hidden += i128::from(circulation.hidden_in) - i128::from(circulation.hidden_out);
        };
        add(&mut supply, Circulation::entered(issuer, 100), 100); // mint
        add(&mut supply, Circulation::left(bridge, 30), -30); // funding (inputs 50, change 20)
        add(&mut supply, Circulation::entered(bridge, 10), 10); // payout
        let shield = Circulation {
            hidden_in: 25,
            hidden_out: 5,
            ..Circulation::default()
        };
        add(&mut supply, shield, -20); // a confidential payment shielding 20
        add(&mut supply, Circulation::left(issuer, 40), -40); // redeem
        assert_eq!(supply.circulating(), 100 - 30 + 10 - 40);
        assert_eq!((supply.outputs(), supply.hidden()), (20, 20));
        assert!(supply.balanced());
        assert_eq!(supply.counterparties()[0].role, "bridge", "in role order");

        let mut bytes = Vec::new();
        supply.encode_to(&mut bytes);
        assert!(bytes.len() <= Supply::encoded_bytes_max());
        let decoded = Supply::decode_from(&mut Reader::new(&bytes)).expect("decodes");
        assert_eq!(decoded, supply);

        // A transfer whose outputs exceed its inputs: nothing entered, yet the outputs grew.
        add(&mut supply, Circulation::default(), 1);
        assert!(!supply.balanced());
    }

    #[test]
    fn a_decoder_refuses_counterparties_out_of_order() {
        let mut supply = Supply::default();
        supply.flow_mut(counterparty("b", 1)).entered = 5;
        supply.flow_mut(counterparty("a", 1)).entered = 5;
        let mut bytes = Vec::new();
        supply.encode_to(&mut bytes);
        // Swap the two entries (each 8 + 1 + 32 + 32 bytes after the count).
        let entry = 8 + 1 + 32 + 32;
        let (first, rest) = bytes[8..].split_at_mut(entry);
        first.swap_with_slice(&mut rest[..entry]);
        let error = Supply::decode_from(&mut Reader::new(&bytes)).expect_err("out of order");
        assert!(matches!(error, DecodeError::NonCanonical { .. }), "{error:?}");
    }
}
