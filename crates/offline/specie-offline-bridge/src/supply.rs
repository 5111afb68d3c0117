//! The authority's books as the platform's supply report reads them (`specie audit supply
//! --offline`, `specie demo --offline`).

use specie_api::supply::ModeBooks;
use specie_offline_service::http_api::BooksBody;
use specie_transaction::Counterparty;

/// The books as the supply report reads them: the authority holds the tokens outstanding
/// for the core's bridge key `bridge` (hex); the books balance when funded − paid back =
/// outstanding and no key paid back more than it issued. The double-spent value refused is
/// named beside (it never left the authority).
pub fn mode_books(books: &BooksBody, name: String, bridge: &str) -> ModeBooks {
    let number = |text: &str| text.parse::<u128>().ok();
    let (funded, defunded, outstanding) = (
        number(&books.funded),
        number(&books.defunded),
        number(&books.outstanding),
    );
    let keys_within = books
        .by_key
        .iter()
        .all(|key| match (number(&key.paid), number(&key.issued)) {
            (Some(paid), Some(issued)) => paid <= issued,
            _ => false,
        });
    let double_spent: u128 = books.debts.iter().filter_map(|debt| number(&debt.value)).sum();
    let holds = outstanding.unwrap_or(0);
    ModeBooks {
        name,
        role: Counterparty::BRIDGE.to_string(),
        key: bridge.to_string(),
        also_keys: vec![],
        holds,
        parts: vec![("tokens outstanding".to_string(), holds)],
        notes: vec![("double-spent value refused".to_string(), double_spent)],
        balanced: keys_within
            && outstanding.is_some()
            && funded.zip(defunded).and_then(|(f, d)| f.checked_sub(d)) == outstanding,
    }
}
