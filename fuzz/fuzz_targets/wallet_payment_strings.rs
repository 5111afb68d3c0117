//! Feeds arbitrary text to the wallet's payment-string decoders (`specie_wallet`): the
//! transparent `specie-pay1…` and the confidential `specie-cpay1…` strings, which a payee pastes
//! from anyone. Nothing may panic; whatever parses must encode back to one canonical string that
//! parses to the same payment (the prefix's case is the only freedom).

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_wallet::{ConfidentialPaymentString, PaymentString};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(payment) = PaymentString::parse(text) {
        let canonical = payment.encode();
        assert_eq!(PaymentString::parse(&canonical).expect("its own encoding parses"), payment);
    }
    if let Ok(payment) = ConfidentialPaymentString::parse(text) {
        let canonical = payment.encode();
        assert_eq!(canonical, text.trim().to_ascii_lowercase(), "one string per output");
        assert_eq!(ConfidentialPaymentString::parse(&canonical).expect("its own encoding parses"), payment);
    }
});
