//! The exchange's books for one currency as that currency's core's supply report reads them
//! (`specie audit supply --exchange`, `specie demo --exchange`).

use specie_api::supply::ModeBooks;
use specie_exchange_service::http_api::ExchangeSupplyBody;
use specie_transaction::Counterparty;

/// Asset `asset`'s books as the supply report of its core reads them; `None` if the exchange
/// trades no such asset. They balance when balances + offers + burned = deposited −
/// withdrawn.
pub fn mode_books(supply: &ExchangeSupplyBody, asset: &str) -> Option<ModeBooks> {
    let held = supply.assets.iter().find(|each| each.name == asset)?;
    let number = |text: &str| text.parse::<u128>().ok();
    let parts = [
        ("balances", &held.balances),
        ("in offers", &held.locked),
        ("burned commission", &held.burned),
    ];
    let values: Option<Vec<u128>> = parts.iter().map(|(_, text)| number(text)).collect();
    let values = values.unwrap_or_default();
    let holds: u128 = values.iter().sum();
    let net = number(&held.deposited)
        .zip(number(&held.withdrawn))
        .and_then(|(deposited, withdrawn)| deposited.checked_sub(withdrawn));
    Some(ModeBooks {
        name: format!("the exchange ({asset})"),
        role: Counterparty::BRIDGE.to_string(),
        key: supply.bridge.clone(),
        also_keys: vec![],
        holds,
        parts: parts
            .iter()
            .zip(&values)
            .map(|((what, _), v)| (what.to_string(), *v))
            .collect(),
        notes: vec![],
        balanced: values.len() == parts.len() && net == Some(holds),
    })
}
