//! Every MIG layout a model can reach, enumerated once per fleet, so that the
//! hot path answers "where can profile P still go?" and "what does placing P
//! at S leave?" with array look-ups instead of re-validating layouts.
//!
//! The rules themselves come from `crate::mig` (`free_starts`); this is only
//! a memo of them.

use std::collections::BTreeMap;

use crate::catalogue::{GpuModel, MigSpec};
use crate::mig::{self, MigPlacement};

use super::error::FleetError;

/// Marks "no such transition" in [`MigTable::next`].
pub(crate) const NO_STATE: u32 = u32::MAX;
/// Index of the empty layout.
pub(crate) const EMPTY_STATE: u32 = 0;
/// Start slices are encoded in 3 bits.
const MAX_STARTS: usize = 8;

/// Reachable layouts of one MIG model and the moves between them.
#[derive(Clone, Debug)]
pub(crate) struct MigTable {
    spec: &'static MigSpec,
    profiles: usize,
    /// Per state: (profile index, start) of each instance, sorted.
    entries: Vec<Vec<(u8, u8)>>,
    /// Per state and profile: bit `s` set when the profile can start at `s`.
    masks: Vec<u16>,
    /// Per state, profile and start: the state reached.
    next: Vec<u32>,
    /// Per state: compute slices in use.
    used_compute: Vec<u8>,
    index: BTreeMap<u64, u32>,
}

fn key_of(entries: &[(u8, u8)]) -> u64 {
    entries.iter().fold(0u64, |acc, &(p, s)| {
        (acc << 8) | (u64::from(p + 1) << 3) | u64::from(s)
    })
}

fn layout_of(spec: &MigSpec, entries: &[(u8, u8)]) -> Vec<MigPlacement> {
    entries
        .iter()
        .filter_map(|&(p, s)| {
            spec.profiles
                .get(usize::from(p))
                .map(|profile| MigPlacement {
                    profile: profile.name.to_string(),
                    start: s,
                })
        })
        .collect()
}

/// The tables built so far, by the address of their (static) MIG spec.
type Tables = std::sync::Mutex<std::collections::HashMap<usize, std::sync::Arc<MigTable>>>;

impl MigTable {
    /// The table of `model`, built once per MIG spec for the process: it
    /// depends on nothing else, and building it (enumerating and checking
    /// every reachable layout) costs far more than indexing a fleet.
    pub(crate) fn shared(model: &GpuModel) -> Result<Option<std::sync::Arc<Self>>, FleetError> {
        static TABLES: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
        let Some(spec) = model.mig else {
            return Ok(None);
        };
        let key = std::ptr::from_ref(spec) as usize;
        let tables = TABLES.get_or_init(Tables::default);
        let lock = || {
            tables
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(table) = lock().get(&key) {
            return Ok(Some(std::sync::Arc::clone(table)));
        }
        // Built outside the lock; two first builds at once both succeed alike.
        let built = Self::build(model)?.map(std::sync::Arc::new);
        if let Some(table) = &built {
            lock().insert(key, std::sync::Arc::clone(table));
        }
        Ok(built)
    }

    /// Enumerates all layouts of `model` reachable from the empty GPU.
    pub(crate) fn build(model: &GpuModel) -> Result<Option<Self>, FleetError> {
        let Some(spec) = model.mig else {
            return Ok(None);
        };
        let unsupported = |reason: &str| FleetError::UnsupportedMigSpec {
            model: model.name.to_string(),
            reason: reason.to_string(),
        };
        let profiles = spec.profiles.len();
        if profiles > 30 {
            return Err(unsupported("more than 30 profiles"));
        }
        let mut table = Self {
            spec,
            profiles,
            entries: vec![Vec::new()],
            masks: Vec::new(),
            next: Vec::new(),
            used_compute: vec![0],
            index: BTreeMap::from([(0u64, EMPTY_STATE)]),
        };
        let mut state = 0usize;
        while state < table.entries.len() {
            let entries = table.entries[state].clone();
            let layout = layout_of(spec, &entries);
            let mut next_row = vec![NO_STATE; profiles * MAX_STARTS];
            let mut mask_row = vec![0u16; profiles];
            for (p, profile) in spec.profiles.iter().enumerate() {
                for start in mig::free_starts(model, &layout, profile.name) {
                    let s = usize::from(start);
                    if s >= MAX_STARTS {
                        return Err(unsupported("a start slice above 7"));
                    }
                    let mut grown = entries.clone();
                    grown.push((p as u8, start));
                    grown.sort_unstable_by_key(|&(p, s)| (s, p));
                    if grown.len() > MAX_STARTS {
                        return Err(unsupported("more than 8 instances"));
                    }
                    let key = key_of(&grown);
                    let id = match table.index.get(&key) {
                        Some(id) => *id,
                        None => {
                            let id = table.entries.len() as u32;
                            let used = grown
                                .iter()
                                .map(|&(p, _)| spec.profiles[usize::from(p)].compute_slices)
                                .fold(0u8, u8::saturating_add);
                            table.index.insert(key, id);
                            table.entries.push(grown);
                            table.used_compute.push(used);
                            id
                        }
                    };
                    next_row[p * MAX_STARTS + s] = id;
                    mask_row[p] |= 1 << s;
                }
            }
            table.next.extend_from_slice(&next_row);
            table.masks.extend_from_slice(&mask_row);
            state += 1;
        }
        Ok(Some(table))
    }

    /// The catalogue geometry.
    pub(crate) fn spec(&self) -> &'static MigSpec {
        self.spec
    }

    /// The state of an existing layout; `Err` names the broken rule.
    pub(crate) fn state_of(
        &self,
        model: &GpuModel,
        layout: &[MigPlacement],
    ) -> Result<u32, String> {
        mig::validate(model, layout).map_err(|e| e.to_string())?;
        let mut entries = Vec::with_capacity(layout.len());
        for placement in layout {
            let p = self
                .profile_index(&placement.profile)
                .ok_or_else(|| format!("unknown profile {}", placement.profile))?;
            entries.push((p, placement.start));
        }
        entries.sort_unstable_by_key(|&(p, s)| (s, p));
        self.index
            .get(&key_of(&entries))
            .copied()
            .ok_or_else(|| "layout cannot be reached by creating instances".to_string())
    }

    /// Index of a profile by name, matched as [`MigSpec::profile`] matches
    /// (case-insensitive, `MIG ` prefix allowed).
    pub(crate) fn profile_index(&self, name: &str) -> Option<u8> {
        let wanted = self.spec.profile(name)?;
        self.spec
            .profiles
            .iter()
            .position(|p| std::ptr::eq(p, wanted))
            .map(|p| p as u8)
    }

    /// The catalogue's spelling of a profile name, if the model offers it.
    pub(crate) fn canonical_name(&self, name: &str) -> Option<&'static str> {
        self.spec.profile(name).map(|p| p.name)
    }

    /// Bit `s` set when profile `p` can be created at start `s` in `state`.
    #[inline]
    pub(crate) fn free_mask(&self, state: u32, profile: u8) -> u16 {
        self.masks
            .get(state as usize * self.profiles + usize::from(profile))
            .copied()
            .unwrap_or(0)
    }

    /// The state after creating profile `p` at `start`, or [`NO_STATE`].
    #[inline]
    pub(crate) fn next(&self, state: u32, profile: u8, start: u8) -> u32 {
        let i = (state as usize * self.profiles + usize::from(profile)) * MAX_STARTS
            + usize::from(start);
        self.next.get(i).copied().unwrap_or(NO_STATE)
    }

    /// The state after destroying the instance (`p`, `start`), if it exists.
    pub(crate) fn without(&self, state: u32, profile: u8, start: u8) -> Option<u32> {
        let mut entries = self.entries.get(state as usize)?.clone();
        let pos = entries.iter().position(|&e| e == (profile, start))?;
        entries.remove(pos);
        self.index.get(&key_of(&entries)).copied()
    }

    /// Free compute, in thousandths of the GPU.
    #[inline]
    pub(crate) fn free_milli(&self, state: u32) -> u32 {
        let total = u32::from(self.spec.compute_slices.max(1));
        let used = u32::from(self.used_compute.get(state as usize).copied().unwrap_or(0));
        total.saturating_sub(used) * 1000 / total
    }

    /// Number of layouts enumerated.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}
