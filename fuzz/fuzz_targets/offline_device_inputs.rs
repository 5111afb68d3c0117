//! Feeds arbitrary bytes to what a device reads from strangers and from disk: the device file
//! (`Device::decode`), payment request and payment strings (`specie offline device pay` and
//! `receive` take them from anyone), and the lines of a direct hand-over (another device process
//! sends them over a local link). Nothing may panic; a device file that decodes must re-encode to
//! exactly the input (it has one encoding); a string that parses must print back to a string that
//! parses to the same thing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use specie_offline_device::Device;
use specie_offline_service::device::{parse_payment, parse_request, payment_string, request_string};
use specie_offline_service::hand_over::decode_line;

fuzz_target!(|data: &[u8]| {
    if let Ok(device) = Device::decode(data) {
        assert_eq!(device.encode(), data, "a device file has one encoding");
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(request) = parse_request(text) {
        assert_eq!(parse_request(&request_string(&request)).ok(), Some(request));
    }
    if let Ok((nonce, tokens)) = parse_payment(text) {
        let again = parse_payment(&payment_string(&nonce, &tokens)).expect("a printed payment parses");
        assert_eq!(again, (nonce, tokens));
    }
    let _ = decode_line(text.trim_end_matches('\n'));
});
