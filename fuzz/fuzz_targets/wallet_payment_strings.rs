//! Feeds arbitrary text to the wallet's payment-string decoders (`specie_wallet`, and
//! `specie_privacy_wallet` for the private ones): the
//! transparent `specie-pay1…`, the confidential `specie-cpay1…`, the anonymous `specie-apay1…` and
//! the unlinkable `specie-upay1…` strings, which a payee pastes from anyone; and to the enrolment's texts (`specie_credential`:
//! challenge, request, credential), which the wallet and the RA paste from each other. Nothing
//! may panic; whatever parses must encode back to one canonical string that parses to the same
//! value (the prefix's case is the only freedom of the payment strings).

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_credential::{Credential, EnrolmentChallenge, EnrolmentRequest, Textual};
use specie_privacy_wallet::{AnonymousPaymentString, ConfidentialPaymentString, UnlinkablePaymentString};
use specie_wallet::PaymentString;

fn canonical_text<T: Textual + PartialEq + std::fmt::Debug>(text: &str) {
    if let Ok(value) = T::from_text(text) {
        let canonical = value.to_text();
        assert!(canonical.eq_ignore_ascii_case(text.trim()), "one text per message, up to the case of its hex");
        assert_eq!(T::from_text(&canonical).expect("its own text parses"), value);
    }
}

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
    if let Ok(payment) = AnonymousPaymentString::parse(text) {
        let canonical = payment.encode();
        assert_eq!(canonical, text.trim().to_ascii_lowercase(), "one string per output");
        let again = AnonymousPaymentString::parse(&canonical).expect("its own encoding parses");
        assert_eq!(again, payment);
        assert_eq!(again.uhs_id(), payment.to_input().uhs_id());
    }
    if let Ok(payment) = UnlinkablePaymentString::parse(text) {
        let canonical = payment.encode();
        assert_eq!(canonical, text.trim().to_ascii_lowercase(), "one string per token");
        let again = UnlinkablePaymentString::parse(&canonical).expect("its own encoding parses");
        assert_eq!(again.uhs_id(), payment.uhs_id());
        assert_eq!(again, payment);
    }
    canonical_text::<EnrolmentChallenge>(text);
    canonical_text::<EnrolmentRequest>(text);
    canonical_text::<Credential>(text);
});
