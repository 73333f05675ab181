//! Adding and dropping columns one per `ALTER TABLE` (SQLite takes one
//! change per statement).

use sea_orm_migration::prelude::*;

/// Adds `columns` to `table`, one statement each.
pub(crate) async fn add_columns<T: IntoIden + Copy + 'static>(
    manager: &SchemaManager<'_>,
    table: T,
    columns: Vec<ColumnDef>,
) -> Result<(), DbErr> {
    for mut c in columns {
        manager
            .alter_table(Table::alter().table(table).add_column(&mut c).to_owned())
            .await?;
    }
    Ok(())
}

/// Drops `columns` from `table`, one statement each.
pub(crate) async fn drop_columns<T: IntoIden + Copy + 'static, C: IntoIden>(
    manager: &SchemaManager<'_>,
    table: T,
    columns: impl IntoIterator<Item = C>,
) -> Result<(), DbErr> {
    for c in columns {
        manager
            .alter_table(Table::alter().table(table).drop_column(c).to_owned())
            .await?;
    }
    Ok(())
}
