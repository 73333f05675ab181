//! The FinOps FOCUS 1.0 CSV of a period's usage: rows per slice, month
//! and price (GPU-hours, and GiB-hours where memory is priced), with every
//! column FOCUS 1.0 requires and Tessera's own in
//! `x_` columns (`x_GpuShare`, `x_SharingMode`, `x_Efficiency`, …). The
//! FinOps Foundation's `focus-validator` checks it in `make test`
//! (end2end/tests/policy.test.mjs, scripts/focus-validate.sh).

use super::*;

/// FOCUS 1.0's columns (its specification's names), then Tessera's.
const COLUMNS: [&str; 49] = [
    "AvailabilityZone",
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "CommitmentDiscountCategory",
    "CommitmentDiscountId",
    "CommitmentDiscountName",
    "CommitmentDiscountStatus",
    "CommitmentDiscountType",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "ContractedUnitPrice",
    "EffectiveCost",
    "InvoiceIssuer",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "Provider",
    "Publisher",
    "RegionId",
    "RegionName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "SkuId",
    "SkuPriceId",
    "SubAccountId",
    "SubAccountName",
    "Tags",
    "x_GpuShare",
    "x_SharingMode",
    "x_Efficiency",
    "x_UsedGpuHours",
    "x_GibHours",
    "x_CostCentre",
];

/// The billing account every row is billed to: the Tessera installation.
const BILLING_ACCOUNT: &str = "tessera";

/// The currency of rows in pools without a price (BillingCurrency may not
/// be empty): the currency most prices use, else US dollars.
fn default_currency(prices: &[Price]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for p in prices {
        *counts.entry(p.currency.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .max_by_key(|(_, n)| *n)
        .map_or_else(|| "USD".to_owned(), |(c, _)| c.to_owned())
}

/// A decimal FOCUS reads as one (always with a point).
fn decimal(v: f64) -> String {
    format!("{v:.6}")
}

impl Service {
    /// The period's charges as CSV in the FinOps FOCUS 1.0 layout: one
    /// row per slice, month and price for its GPU-hours, and one for its
    /// GiB-hours where the pool prices memory.
    pub async fn usage_focus_csv(
        &self,
        who: &Principal,
        q: &UsageQuery,
    ) -> Result<String, ServiceError> {
        let m = self.metering(who, q).await?;
        let mut out = COLUMNS.join(",");
        out.push('\n');
        let rfc = |t: i64| at(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        let fallback = default_currency(&m.prices);
        for l in &m.lines {
            let s = m.slices.get(&l.allocation);
            let month = month_of(at(l.start));
            let price = tessera_core::metering::price_at(&m.prices, &l.pool, l.start);
            let mut tags = serde_json::Map::new();
            tags.insert("tessera/pool".into(), l.pool.to_string().into());
            if let Some(s) = s {
                tags.insert("tessera/tenant".into(), s.tenant.clone().into());
                tags.insert("tessera/shape".into(), s.shape.clone().into());
            }
            let tags = serde_json::Value::Object(tags).to_string();
            let used = (l.measured_ms > 0).then(|| l.used_gpu_hours());
            let efficiency = (l.measured_ms > 0 && l.compute_milli_ms > 0)
                .then(|| decimal(l.used_milli_ms as f64 * 100.0 / l.compute_milli_ms as f64));
            let mode = s.map(|s| match s.mode {
                tessera_core::sharing::ShapeKind::Mig => "mig",
                tessera_core::sharing::ShapeKind::Mps => "mps",
                tessera_core::sharing::ShapeKind::TimeSlice => "time-slice",
                tessera_core::sharing::ShapeKind::Whole => "whole",
            });
            // A row for the GPU-hours, and one for the GiB-hours of GPU
            // memory where the pool prices them: each row's cost is its
            // unit price × its quantity, as FOCUS has it.
            let mut charges = vec![(
                "GPU-Hours",
                l.gpu_hours(),
                l.gpu_cost_micros,
                price.map(|p| p.gpu_hour_micros),
                "",
            )];
            if price.is_some_and(|p| p.gib_hour_micros > 0) {
                charges.push((
                    "GiB-Hours",
                    l.gib_hours(),
                    l.gib_cost_micros,
                    price.map(|p| p.gib_hour_micros),
                    "/memory",
                ));
            }
            for (unit, quantity, cost, unit_price, sku) in charges {
                let cost = format_micros(cost);
                let quantity = decimal(quantity);
                let unit_price =
                    unit_price.map_or_else(String::new, |p| format_micros(u128::from(p)));
                let fields: [String; 49] = [
                    String::new(),
                    cost.clone(),
                    BILLING_ACCOUNT.to_owned(),
                    "Tessera GPU sharing".to_owned(),
                    l.currency.clone().unwrap_or_else(|| fallback.clone()),
                    rfc(ms(next_month(month))),
                    rfc(ms(month)),
                    "Usage".to_owned(),
                    String::new(),
                    format!(
                        "{}{} in pool {}",
                        s.map_or("GPU slice", |s| s.shape.as_str()),
                        if sku.is_empty() { "" } else { ", GPU memory" },
                        l.pool
                    ),
                    "Usage-Based".to_owned(),
                    rfc(l.end),
                    rfc(l.start),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    quantity.clone(),
                    unit.to_owned(),
                    cost.clone(),
                    unit_price.clone(),
                    cost.clone(),
                    "Tessera".to_owned(),
                    cost,
                    unit_price,
                    "Standard".to_owned(),
                    quantity,
                    unit.to_owned(),
                    "Tessera".to_owned(),
                    "Tessera".to_owned(),
                    String::new(),
                    String::new(),
                    format!("allocation/{}", l.allocation),
                    s.map_or_else(String::new, |s| format!("#{} {}", l.allocation, s.shape)),
                    "GPU slice".to_owned(),
                    "AI and Machine Learning".to_owned(),
                    "Tessera GPU slices".to_owned(),
                    format!("pool/{}{sku}", l.pool),
                    price.map_or_else(
                        || format!("pool/{}{sku}/unpriced", l.pool),
                        |p| format!("pool/{}{sku}/{}", l.pool, rfc(p.effective_from)),
                    ),
                    s.map_or_else(String::new, |s| format!("tenant/{}", s.tenant)),
                    s.map_or_else(String::new, |s| s.tenant_name.clone()),
                    tags.clone(),
                    s.map_or_else(String::new, |s| decimal(s.share.as_gpus())),
                    mode.unwrap_or_default().to_owned(),
                    efficiency.clone().unwrap_or_default(),
                    used.map(decimal).unwrap_or_default(),
                    decimal(l.gib_hours()),
                    s.and_then(|s| s.cost_centre.clone()).unwrap_or_default(),
                ];
                let row: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
                out.push_str(&row.join(","));
                out.push('\n');
            }
        }
        Ok(out)
    }
}
