//! Prices per pool, set by platform admins with the date they take effect.

use super::*;

impl Service {
    /// Every price as metering reads it, oldest first.
    pub(crate) async fn price_list(&self) -> Result<Vec<Price>, ServiceError> {
        Ok(price::Entity::find()
            .order_by_asc(price::Column::EffectiveFrom)
            .all(&self.db)
            .await?
            .iter()
            .map(price_of)
            .collect())
    }

    /// Every price, newest first (anyone signed in: tenants see what their
    /// slices cost).
    pub async fn prices(&self, _who: &Principal) -> Result<Vec<PriceView>, ServiceError> {
        Ok(price::Entity::find()
            .order_by_asc(price::Column::Pool)
            .order_by_desc(price::Column::EffectiveFrom)
            .all(&self.db)
            .await?
            .iter()
            .map(price_view)
            .collect())
    }

    /// Sets a pool's price from now or a later moment (platform admins).
    pub async fn set_price(
        &self,
        admin: &PlatformAdmin<'_>,
        new: &NewPrice,
    ) -> Result<PriceView, ServiceError> {
        let now = self.now();
        let money = |field: &str, text: &str| {
            let text = if text.trim().is_empty() { "0" } else { text };
            parse_micros(text).ok_or_else(|| {
                ServiceError::invalid(
                    field,
                    format!("'{text}' is not an amount such as 2.50 (up to 6 decimals)"),
                )
            })
        };
        let effective_from = new.effective_from.unwrap_or(now);
        // A minute of leeway for a form filled in "now".
        if effective_from < now - chrono::Duration::minutes(1) {
            return Err(ServiceError::invalid(
                "effective_from",
                "must be now or later: past periods keep the price they had",
            ));
        }
        let p = Price {
            pool: new.pool.clone(),
            currency: new.currency.trim().to_ascii_uppercase(),
            gpu_hour_micros: money("gpu_hour", &new.gpu_hour)?,
            gib_hour_micros: money("gib_hour", &new.gib_hour)?,
            effective_from: ms(effective_from),
            recovery: new.recovery.unwrap_or_default(),
        };
        validate_price(&p).map_err(|(field, why)| ServiceError::invalid(field, why))?;
        let mut w = self.begin_write().await?;
        let pools = self.pools(w.db()).await?;
        Self::pool_named(&pools, "pool", &new.pool)?;
        // Unless named, the policy stays what the pool had.
        let recovery = match new.recovery {
            Some(r) => r,
            None => price::Entity::find()
                .filter(price::Column::Pool.eq(&p.pool))
                .filter(price::Column::EffectiveFrom.lte(effective_from))
                .order_by_desc(price::Column::EffectiveFrom)
                .one(w.db())
                .await?
                .map(|r| r.recovery)
                .unwrap_or_default(),
        };
        let taken = price::Entity::find()
            .filter(price::Column::Pool.eq(&p.pool))
            .filter(price::Column::EffectiveFrom.eq(effective_from))
            .one(w.db())
            .await?
            .is_some();
        if taken {
            return Err(ServiceError::Conflict(format!(
                "pool '{}' already has a price from {effective_from}",
                p.pool
            )));
        }
        let row = price::ActiveModel {
            pool: Set(p.pool.clone()),
            currency: Set(p.currency.clone()),
            gpu_hour_micros: Set(i64::try_from(p.gpu_hour_micros).unwrap_or(i64::MAX)),
            gib_hour_micros: Set(i64::try_from(p.gib_hour_micros).unwrap_or(i64::MAX)),
            effective_from: Set(effective_from),
            recovery: Set(recovery),
            created_by: Set(admin.principal().name().to_owned()),
            created_at: Set(now),
            ..Default::default()
        }
        .insert(w.db())
        .await?;
        w.emit(DomainEvent::PriceSet {
            price: price_view(&row),
        });
        w.commit(self, &Actor::User(admin.principal())).await?;
        Ok(price_view(&row))
    }
}
