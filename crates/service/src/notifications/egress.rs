//! Where Tessera may send a tenant's webhook: the public internet only,
//! unless the operator allows an internal network.
//!
//! A tenant admin chooses the URL, so without this rule a webhook could
//! reach the cloud metadata service, the database or any internal admin
//! page, and the delivery's outcome would be a port scanner. The rule is
//! checked on the address actually connected to (the server's resolver
//! filters every lookup and the connection uses only what passed, so DNS
//! rebinding cannot slip a second answer past it), and on IP literals in the
//! URL however they are spelled (`2130706433`, `0x7f.1`, `[::ffff:7f00:1]`
//! all parse to 127.0.0.1).

use ipnet::IpNet;
use serde::Deserialize;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The operator's exceptions: networks webhooks may reach even though they
/// are internal (`[webhooks] allowed_networks = ["10.20.0.0/16"]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(transparent)]
pub struct EgressPolicy {
    allowed: Vec<IpNet>,
}

impl EgressPolicy {
    /// A policy that also allows `allowed`.
    pub fn allowing(allowed: Vec<IpNet>) -> Self {
        Self { allowed }
    }

    /// Whether `url`'s host may be reached as far as the URL itself tells:
    /// an address literal (in any spelling the URL parser accepts) is
    /// checked; a name is checked when it is resolved.
    pub fn permits_url(&self, url: &url::Url) -> bool {
        match url.host() {
            Some(url::Host::Ipv4(v4)) => self.permits(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => self.permits(IpAddr::V6(v6)),
            Some(url::Host::Domain(_)) => true,
            None => false,
        }
    }

    /// Whether a webhook may connect to `ip`.
    pub fn permits(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        is_global(ip) || self.allowed.iter().any(|n| n.contains(&ip))
    }
}

/// An IPv4-mapped, IPv4-compatible or NAT64 IPv6 address as the IPv4
/// address it reaches; any other address unchanged.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            // NAT64 well-known prefix 64:ff9b::/96 and the deprecated
            // IPv4-compatible ::a.b.c.d both embed an IPv4 address.
            if (s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || s[..6] == [0; 6])
                && !v6.is_loopback()
                && !v6.is_unspecified()
            {
                let [.., a, b] = s;
                return IpAddr::V4(Ipv4Addr::new(
                    (a >> 8) as u8,
                    a as u8,
                    (b >> 8) as u8,
                    b as u8,
                ));
            }
            IpAddr::V6(v6)
        }
        v4 => v4,
    }
}

/// Whether `ip` is a public unicast address (not loopback, private,
/// link-local, shared, unique-local, multicast, unspecified, documentation,
/// benchmarking or reserved).
fn is_global(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_global_v4(v4),
        IpAddr::V6(v6) => is_global_v6(v6),
    }
}

fn is_global_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(ip.is_unspecified()
        || a == 0 // "this network"
        || ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || (a == 100 && (b & 0xc0) == 64) // shared address space 100.64/10
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || ip.is_documentation()
        || (a == 198 && (b & 0xfe) == 18) // benchmarking 198.18/15
        || ip.is_multicast()
        || a >= 240) // reserved and broadcast
}

fn is_global_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_unspecified()
        || ip.is_loopback()
        || ip.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00 // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80 // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0 // site-local (deprecated) fec0::/10
        || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
        || (s[0] == 0x2001 && s[1] < 0x0200) // IETF special purpose incl. Teredo
        || s[0] == 0x2002 // 6to4 embeds an IPv4 address: refuse rather than guess
        || (s[0] == 0x0100 && s[1..4] == [0, 0, 0])) // discard-only 100::/64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn internal_addresses_are_refused() {
        let policy = EgressPolicy::default();
        for s in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "172.16.5.4",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "192.0.0.170",
            "198.18.0.1",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "240.0.0.1",
            "192.0.2.1",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001::1",
            "2002:7f00:1::",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "64:ff9b::7f00:1",
        ] {
            assert!(!policy.permits(ip(s)), "{s} must be refused");
        }
    }

    #[test]
    fn public_addresses_pass() {
        let policy = EgressPolicy::default();
        for s in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
        ] {
            assert!(policy.permits(ip(s)), "{s} must pass");
        }
    }

    #[test]
    fn the_operator_can_allow_an_internal_network() {
        let policy: EgressPolicy = serde_json::from_str(r#"["10.20.0.0/16", "::1/128"]"#).unwrap();
        assert!(policy.permits(ip("10.20.3.4")));
        assert!(policy.permits(ip("::ffff:10.20.3.4")), "mapped form too");
        assert!(policy.permits(ip("::1")));
        assert!(!policy.permits(ip("10.21.0.1")));
        assert!(!policy.permits(ip("127.0.0.1")));
    }

    #[test]
    fn numeric_url_hosts_parse_to_what_they_reach() {
        // The URL parser (the same one reqwest uses) normalises the numeric
        // spellings, so checking `Url::host` checks the real address.
        for raw in [
            "http://2130706433/",
            "http://0x7f000001/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://[::ffff:7f00:1]/",
        ] {
            let url = url::Url::parse(raw).unwrap();
            let host = match url.host().unwrap() {
                url::Host::Ipv4(v4) => IpAddr::V4(v4),
                url::Host::Ipv6(v6) => IpAddr::V6(v6),
                url::Host::Domain(d) => panic!("{raw} parsed as the name {d}"),
            };
            assert!(!EgressPolicy::default().permits(host), "{raw}");
        }
    }
}
