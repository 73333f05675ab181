//! The FinOps FOCUS CSV of a month's usage.

use super::*;

impl Service {
    /// The period's charges as CSV in the FinOps FOCUS column layout: one
    /// row per slice, month and price.
    pub async fn usage_focus_csv(
        &self,
        who: &Principal,
        q: &UsageQuery,
    ) -> Result<String, ServiceError> {
        const COLUMNS: [&str; 24] = [
            "BilledCost",
            "EffectiveCost",
            "ListCost",
            "ListUnitPrice",
            "BillingCurrency",
            "BillingPeriodStart",
            "BillingPeriodEnd",
            "ChargePeriodStart",
            "ChargePeriodEnd",
            "ChargeCategory",
            "ChargeDescription",
            "ConsumedQuantity",
            "ConsumedUnit",
            "PricingQuantity",
            "PricingUnit",
            "ProviderName",
            "ServiceName",
            "ServiceCategory",
            "ResourceId",
            "ResourceName",
            "SkuId",
            "SubAccountId",
            "SubAccountName",
            "Tags",
        ];
        let m = self.metering(who, q).await?;
        let mut out = COLUMNS.join(",");
        out.push('\n');
        let rfc = |t: i64| at(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        for l in &m.lines {
            let s = m.slices.get(&l.allocation);
            let month = month_of(at(l.start));
            let price = tessera_core::metering::price_at(&m.prices, &l.pool, l.start);
            let quantity = format!("{:.6}", l.gpu_hours());
            let tags = serde_json::json!({
                "tenant": s.map(|s| s.tenant.clone()),
                "cost_centre": s.and_then(|s| s.cost_centre.clone()),
                "pool": l.pool,
                "gib_hours": format!("{:.6}", l.gib_hours()),
                "used_gpu_hours": (l.measured_ms > 0).then(|| format!("{:.6}", l.used_gpu_hours())),
            });
            let cost = format_micros(l.cost_micros);
            let fields = [
                cost.clone(),
                cost.clone(),
                cost,
                price.map_or_else(String::new, |p| {
                    format_micros(u128::from(p.gpu_hour_micros))
                }),
                l.currency.clone().unwrap_or_default(),
                rfc(ms(month)),
                rfc(ms(next_month(month))),
                rfc(l.start),
                rfc(l.end),
                "Usage".to_owned(),
                format!("{} in pool {}", s.map_or("", |s| s.shape.as_str()), l.pool),
                quantity.clone(),
                "GPU-Hours".to_owned(),
                quantity,
                "GPU-Hours".to_owned(),
                "Tessera".to_owned(),
                "Tessera GPU slices".to_owned(),
                "AI and Machine Learning".to_owned(),
                format!("allocation/{}", l.allocation),
                s.map_or_else(String::new, |s| format!("#{} {}", l.allocation, s.shape)),
                l.pool.to_string(),
                s.map_or_else(String::new, |s| s.tenant.clone()),
                s.map_or_else(String::new, |s| s.tenant_name.clone()),
                tags.to_string(),
            ];
            let row: Vec<String> = fields.iter().map(|f| csv_field(f)).collect();
            out.push_str(&row.join(","));
            out.push('\n');
        }
        Ok(out)
    }
}
