//! Integer units used throughout the domain. No floats: quota and capacity
//! arithmetic must be exact and identical in the browser and on the server.
//!
//! Arithmetic operators saturate instead of overflowing or underflowing, so
//! `a - b` never panics; use the `checked_*` helpers where an underflow is a
//! logic error the caller wants to see.

use std::fmt;
use std::iter::Sum;
use std::ops::{Add, AddAssign, Sub, SubAssign};

use serde::{Deserialize, Serialize};

macro_rules! integer_unit {
    ($(#[$meta:meta])* $name:ident($inner:ty)) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        pub struct $name(pub $inner);

        impl $name {
            /// Zero of this unit.
            pub const ZERO: Self = Self(0);

            /// The raw integer value.
            pub const fn get(self) -> $inner {
                self.0
            }

            /// `self + rhs`, or `None` on overflow.
            pub fn checked_add(self, rhs: Self) -> Option<Self> {
                self.0.checked_add(rhs.0).map(Self)
            }

            /// `self - rhs`, or `None` when `rhs > self`.
            pub fn checked_sub(self, rhs: Self) -> Option<Self> {
                self.0.checked_sub(rhs.0).map(Self)
            }

            /// `self + rhs`, clamped at the maximum.
            pub fn saturating_add(self, rhs: Self) -> Self {
                Self(self.0.saturating_add(rhs.0))
            }

            /// `self - rhs`, clamped at zero.
            pub fn saturating_sub(self, rhs: Self) -> Self {
                Self(self.0.saturating_sub(rhs.0))
            }

            /// `self * n`, clamped at the maximum.
            pub fn saturating_mul(self, n: $inner) -> Self {
                Self(self.0.saturating_mul(n))
            }
        }

        /// Saturating addition.
        impl Add for $name {
            type Output = Self;
            fn add(self, rhs: Self) -> Self {
                self.saturating_add(rhs)
            }
        }

        impl AddAssign for $name {
            fn add_assign(&mut self, rhs: Self) {
                *self = self.saturating_add(rhs);
            }
        }

        /// Saturating subtraction (never below zero).
        impl Sub for $name {
            type Output = Self;
            fn sub(self, rhs: Self) -> Self {
                self.saturating_sub(rhs)
            }
        }

        impl SubAssign for $name {
            fn sub_assign(&mut self, rhs: Self) {
                *self = self.saturating_sub(rhs);
            }
        }

        impl Sum for $name {
            fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
                iter.fold(Self::ZERO, |a, b| a + b)
            }
        }

        impl<'a> Sum<&'a $name> for $name {
            fn sum<I: Iterator<Item = &'a Self>>(iter: I) -> Self {
                iter.fold(Self::ZERO, |a, b| a + *b)
            }
        }
    };
}

integer_unit!(
    /// GPU memory in mebibytes (MiB), as NVML and `nvidia-smi` report it.
    MemMiB(u64)
);

integer_unit!(
    /// GPU compute in thousandths of one whole GPU ("GPU-equivalents × 1000").
    /// `ComputeMilli(1000)` is one whole GPU; a 3g MIG instance on a 7-slice GPU
    /// is `ComputeMilli(428)`.
    ComputeMilli(u32)
);

integer_unit!(
    /// Host CPU in thousandths of one core (`1000` = one core), like Kubernetes `m`.
    CpuMilli(u32)
);

impl MemMiB {
    /// `gib` gibibytes.
    pub const fn from_gib(gib: u64) -> Self {
        Self(gib.saturating_mul(1024))
    }

    /// Whole gibibytes, rounded down.
    pub const fn whole_gib(self) -> u64 {
        self.0 / 1024
    }
}

impl ComputeMilli {
    /// One whole GPU.
    pub const WHOLE_GPU: Self = Self(1000);

    /// `n` whole GPUs.
    pub const fn gpus(n: u32) -> Self {
        Self(n.saturating_mul(1000))
    }
}

impl CpuMilli {
    /// `n` whole cores.
    pub const fn cores(n: u32) -> Self {
        Self(n.saturating_mul(1000))
    }
}

impl fmt::Display for MemMiB {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1024 && self.0.is_multiple_of(1024) {
            write!(f, "{} GiB", self.0 / 1024)
        } else {
            write!(f, "{} MiB", self.0)
        }
    }
}

impl fmt::Display for ComputeMilli {
    /// Shown as GPU-equivalents with three decimals, e.g. `0.428 GPU`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03} GPU", self.0 / 1000, self.0 % 1000)
    }
}

impl fmt::Display for CpuMilli {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03} CPU", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(MemMiB(5) - MemMiB(7), MemMiB(0));
        assert_eq!(
            ComputeMilli(u32::MAX) + ComputeMilli(1),
            ComputeMilli(u32::MAX)
        );
        assert_eq!(MemMiB(5).checked_sub(MemMiB(7)), None);
        assert_eq!(
            CpuMilli(1500).checked_sub(CpuMilli(500)),
            Some(CpuMilli(1000))
        );
        let total: MemMiB = [MemMiB(1), MemMiB(2)].iter().sum();
        assert_eq!(total, MemMiB(3));
    }

    #[test]
    fn display_is_human() {
        assert_eq!(MemMiB::from_gib(10).to_string(), "10 GiB");
        assert_eq!(MemMiB(9856).to_string(), "9856 MiB");
        assert_eq!(ComputeMilli(428).to_string(), "0.428 GPU");
        assert_eq!(ComputeMilli::gpus(2).to_string(), "2.000 GPU");
        assert_eq!(CpuMilli::cores(4).to_string(), "4.000 CPU");
    }

    #[test]
    fn serde_is_transparent() {
        assert_eq!(serde_json::to_string(&MemMiB(42)).unwrap(), "42");
        assert_eq!(
            serde_json::from_str::<ComputeMilli>("7").unwrap(),
            ComputeMilli(7)
        );
    }
}
