//! Monthly budgets per tenant or cost centre: when spend and its forecast
//! cross 80 % and 100 %, and when an exceeded budget turns away a request.

use crate::metering::HOUR_MS;
use crate::names::stable_names;
use crate::schedule::QosClass;

stable_names! {
    /// What a budget covers.
    pub enum BudgetScope ("budget_scope") {
        /// One tenant.
        Tenant = "tenant",
        /// Every tenant with that cost centre.
        CostCentre = "cost_centre",
    }
}

stable_names! {
    /// A threshold a budget's month crossed; each is told once a month.
    pub enum BudgetAlert ("budget_alert") {
        /// The forecast for the month reaches 80 %.
        Forecast80 = "forecast_80",
        /// The forecast for the month reaches 100 %.
        Forecast100 = "forecast_100",
        /// Spend so far reaches 80 %.
        Actual80 = "actual_80",
        /// Spend so far reaches 100 %.
        Actual100 = "actual_100",
    }
}

impl BudgetAlert {
    /// The percentage.
    pub fn percent(self) -> u32 {
        match self {
            Self::Forecast80 | Self::Actual80 => 80,
            Self::Forecast100 | Self::Actual100 => 100,
        }
    }

    /// Whether it is about the forecast.
    pub fn is_forecast(self) -> bool {
        matches!(self, Self::Forecast80 | Self::Forecast100)
    }
}

stable_names! {
    /// Where a request for a larger budget stands.
    pub enum BudgetRequestState ("budget_request_state") {
        /// Waiting for a platform admin.
        Pending = "pending",
        /// The budget was raised to the amount asked for.
        Approved = "approved",
        /// Turned down.
        Rejected = "rejected",
    }
}

/// A month's spend against its budget, in millionths of the currency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spend {
    /// The budget.
    pub budget: u128,
    /// Spent so far this month.
    pub actual: u128,
    /// Spent so far plus what the slices running now cost until the month
    /// ends if nothing changes.
    pub forecast: u128,
}

impl Spend {
    /// Works out the forecast: `actual` plus `hourly` (what the running
    /// slices cost per hour now) from `now` to `month_end` (ms).
    pub fn new(budget: u128, actual: u128, hourly: u128, now: i64, month_end: i64) -> Self {
        let left = u128::try_from((month_end - now).max(0)).unwrap_or(0);
        let d = HOUR_MS as u128;
        Self {
            budget,
            actual,
            forecast: actual + (hourly * left + d / 2) / d,
        }
    }

    /// The thresholds reached, in the order they are told.
    pub fn alerts(&self) -> Vec<BudgetAlert> {
        // x % of the budget reached: value × 100 ≥ budget × x.
        let reached = |v: u128, pct: u128| self.budget > 0 && v * 100 >= self.budget * pct;
        [
            (BudgetAlert::Forecast80, self.forecast, 80),
            (BudgetAlert::Forecast100, self.forecast, 100),
            (BudgetAlert::Actual80, self.actual, 80),
            (BudgetAlert::Actual100, self.actual, 100),
        ]
        .into_iter()
        .filter(|(_, v, pct)| reached(*v, *pct))
        .map(|(a, _, _)| a)
        .collect()
    }

    /// Spend so far as a percentage of the budget (0 for no budget).
    pub fn percent(&self) -> f64 {
        if self.budget == 0 {
            return 0.0;
        }
        self.actual as f64 * 100.0 / self.budget as f64
    }

    /// Whether a budget that blocks turns away a request of class `qos`:
    /// once spend reaches the budget, only guaranteed requests (within the
    /// tenant's own quota) still go through.
    pub fn blocks(&self, qos: QosClass) -> bool {
        self.budget > 0 && self.actual >= self.budget && qos != QosClass::Guaranteed
    }
}

/// Which of the thresholds crossed just now (`new`) are told, given those
/// told before this month (`told`): the highest spent one, and the highest
/// forecast one only when it is above every spent one — a month that jumps
/// past several at once sends one notice, not four.
pub fn to_tell(new: &[BudgetAlert], told: &[BudgetAlert]) -> Vec<BudgetAlert> {
    let top = |forecast: bool, among: &mut dyn Iterator<Item = &BudgetAlert>| {
        among
            .filter(|a| a.is_forecast() == forecast)
            .max_by_key(|a| a.percent())
            .copied()
    };
    let actual = top(false, &mut new.iter());
    let actual_pct = top(false, &mut new.iter().chain(told)).map_or(0, BudgetAlert::percent);
    let forecast = top(true, &mut new.iter()).filter(|f| f.percent() > actual_pct);
    actual.into_iter().chain(forecast).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 24 * HOUR_MS;

    #[test]
    fn the_forecast_runs_the_slices_of_now_to_the_month_end() {
        // 300.00 spent, 2.50 an hour running, 10 days left: 300 + 600.
        let s = Spend::new(1_000_000_000, 300_000_000, 2_500_000, 0, 10 * DAY);
        assert_eq!(s.forecast, 900_000_000);
        assert_eq!(s.alerts(), [BudgetAlert::Forecast80]);
        let s = Spend::new(1_000_000_000, 800_000_000, 2_500_000, 0, 10 * DAY);
        assert_eq!(
            s.alerts(),
            [
                BudgetAlert::Forecast80,
                BudgetAlert::Forecast100,
                BudgetAlert::Actual80
            ]
        );
        // After the month ends nothing more is forecast.
        assert_eq!(Spend::new(1, 5, 1_000_000, DAY, 0).forecast, 5);
    }

    #[test]
    fn thresholds_are_reached_at_exactly_their_percentage() {
        let s = |actual| Spend::new(1_000, actual, 0, 0, 0);
        assert!(s(799).alerts().is_empty());
        assert_eq!(
            s(800).alerts(),
            [BudgetAlert::Forecast80, BudgetAlert::Actual80]
        );
        assert_eq!(s(1_000).alerts().len(), 4);
        assert!(
            Spend::new(0, 10, 10, 0, DAY).alerts().is_empty(),
            "no budget, no alerts"
        );
        assert!((s(250).percent() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn an_exceeded_budget_blocks_all_but_guaranteed_requests() {
        let over = Spend::new(100, 100, 0, 0, 0);
        assert!(over.blocks(QosClass::Burstable));
        assert!(over.blocks(QosClass::BestEffort));
        assert!(!over.blocks(QosClass::Guaranteed));
        assert!(
            !Spend::new(100, 99, 50, 0, DAY).blocks(QosClass::BestEffort),
            "forecast alone never blocks"
        );
    }

    #[test]
    fn a_jump_past_several_thresholds_tells_one() {
        use BudgetAlert::*;
        assert_eq!(
            to_tell(&[Forecast80, Forecast100, Actual80, Actual100], &[]),
            [Actual100]
        );
        assert_eq!(
            to_tell(&[Forecast80, Forecast100, Actual80], &[]),
            [Actual80, Forecast100]
        );
        assert_eq!(to_tell(&[Forecast80], &[]), [Forecast80]);
        // A forecast at or below what was already spent says nothing new.
        assert!(to_tell(&[Forecast80], &[Actual80]).is_empty());
        assert_eq!(
            to_tell(&[Forecast100], &[Actual80, Forecast80]),
            [Forecast100]
        );
        assert!(to_tell(&[], &[Actual100]).is_empty());
    }

    #[test]
    fn names_are_stable() {
        let names: Vec<&str> = BudgetAlert::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            names,
            ["forecast_80", "forecast_100", "actual_80", "actual_100"]
        );
        let names: Vec<&str> = BudgetScope::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(names, ["tenant", "cost_centre"]);
        let names: Vec<&str> = BudgetRequestState::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(names, ["pending", "approved", "rejected"]);
    }
}
