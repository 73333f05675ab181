//! Budgets and monthly statements: a tenant's Budget page (spend against
//! budget, the forecast, the thresholds told, the form to set it, and the
//! month's statement) and the printable statement of a tenant or cost
//! centre.

use crate::api::{get_statement, DecideBudgetRequest, DeleteBudget, RequestBudget, SetBudget};
use crate::components::error_panel::{ErrorPanel, FormError};
use crate::format;
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;
use tessera_protocol::query::encode_component;
use tessera_protocol::views::{BudgetView, StatementView};

/// The bar's class for a percentage.
fn bar_class(pct: f64) -> &'static str {
    if pct >= 100.0 {
        "bar-used over"
    } else if pct >= 80.0 {
        "bar-used full"
    } else {
        "bar-used"
    }
}

/// What a budget covers, for people.
fn covers(b: &BudgetView) -> String {
    match (&b.tenant_name, &b.cost_centre) {
        (Some(name), _) => name.clone(),
        (None, Some(cc)) => format!("Cost centre {cc}"),
        _ => format!("Budget {}", b.id),
    }
}

/// One budget: spent and forecast against the amount.
#[component]
pub fn BudgetCard(b: BudgetView) -> impl IntoView {
    let spent = b.percent.clamp(0.0, 100.0);
    let forecast = b.forecast_percent.clamp(0.0, 100.0);
    let alerts = b
        .alerts
        .iter()
        .map(|a| a.as_str().replace('_', " "))
        .collect::<Vec<_>>()
        .join(", ");
    view! {
        <div class="card tile budget" data-test="budget" data-budget=b.id.to_string()>
            <span class="tile-title">{covers(&b)}" · "{b.month.clone()}</span>
            <div class="quota-line">
                <div class="quota-head">
                    <span class="small">"Spent"</span>
                    <span class="muted small" data-test="budget-spent">{format!("{} of {} {} ({:.0} %)", format::money(&b.spent), format::money(&b.amount), b.currency, b.percent)}</span>
                </div>
                <div class="bar" role="img" aria-label=format!("{:.0} % of the budget spent", b.percent)>
                    <span class=bar_class(b.percent) style=format!("width:{spent:.1}%")></span>
                </div>
            </div>
            <div class="quota-line">
                <div class="quota-head">
                    <span class="small">"Forecast"</span>
                    <span class="muted small" data-test="budget-forecast">{format!("{} {} ({:.0} %) if the slices running now keep running", format::money(&b.forecast), b.currency, b.forecast_percent)}</span>
                </div>
                <div class="bar" role="img" aria-label=format!("{:.0} % of the budget forecast", b.forecast_percent)>
                    <span class=bar_class(b.forecast_percent) style=format!("width:{forecast:.1}%")></span>
                </div>
            </div>
            <p class="small muted">
                {if b.blocking {
                    "Spent: only guaranteed requests go through until the month ends or the budget is raised.".to_owned()
                } else if b.block_when_exceeded {
                    "Once spent, only guaranteed requests go through.".to_owned()
                } else {
                    "Never blocks requests: it tells the tenant's admins at 80 % and 100 %.".to_owned()
                }}
                {(!alerts.is_empty()).then(|| format!(" Told this month: {alerts}."))}
            </p>
            {b.pending_request.as_ref().map(|r| view! {
                <p class="small" data-test="budget-pending">{format!("{} asked for {} {} on {}: {}", r.requested_by, format::money(&r.amount), b.currency, format::when(r.created_at), r.reason)}</p>
            })}
            <p class="small muted">{format!("Set by {} on {}", b.set_by, format::when(b.updated_at))}</p>
        </div>
    }
}

/// Approve or reject the request waiting on a budget (platform admins).
#[component]
pub fn DecideRequest(
    /// The request.
    id: i64,
    /// The action.
    decide: ServerAction<DecideBudgetRequest>,
) -> impl IntoView {
    view! {
        <ActionForm action=decide attr:class="form-row" attr:data-test="budget-decide-form">
            <input type="hidden" name="id" value=id.to_string()/>
            <label class="field"><span>"Note"</span><input type="text" name="note" maxlength="500" data-test="budget-decide-note"/></label>
            <button class="button primary" type="submit" name="decision" value="approve" data-test="budget-approve">"Approve"</button>
            <button class="button ghost" type="submit" name="decision" value="reject" data-test="budget-reject">"Reject"</button>
        </ActionForm>
        {move || decide.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
    }
}

/// The form that sets a budget: for a tenant (`tenant` given) or, for
/// platform admins, a tenant or cost centre of their choice.
#[component]
pub fn BudgetForm(
    /// The tenant whose budget it sets (`None`: the admin names one).
    tenant: Option<String>,
    /// The current budget, to start from.
    current: Option<BudgetView>,
    /// Show the "block when spent" choice (platform admins).
    platform_admin: bool,
    /// The action.
    set: ServerAction<SetBudget>,
) -> impl IntoView {
    let amount = current
        .as_ref()
        .map(|b| b.amount.clone())
        .unwrap_or_default();
    let currency = current
        .as_ref()
        .map_or_else(|| "EUR".to_owned(), |b| b.currency.clone());
    let blocks = current.as_ref().is_some_and(|b| b.block_when_exceeded);
    view! {
        <ActionForm action=set attr:class="form-row" attr:data-test="budget-form">
            {match tenant {
                Some(t) => view! { <input type="hidden" name="tenant" value=t/> }.into_any(),
                None => view! {
                    <label class="field"><span>"Tenant (slug)"</span><input type="text" name="tenant" data-test="budget-tenant" placeholder="ml-research"/></label>
                    <label class="field"><span>"or cost centre"</span><input type="text" name="cost_centre" data-test="budget-cost-centre" placeholder="CC-4711"/></label>
                }.into_any(),
            }}
            <label class="field"><span>"Per month"</span><input type="text" name="amount" required inputmode="decimal" value=amount placeholder="1500.00" data-test="budget-amount"/></label>
            <label class="field"><span>"Currency"</span><input type="text" name="currency" required maxlength="3" value=currency data-test="budget-currency"/></label>
            {platform_admin.then(|| view! {
                <input type="hidden" name="block_shown" value="1"/>
                <label class="check"><input type="checkbox" name="block" checked=blocks data-test="budget-block"/><span>"Once spent, only guaranteed requests"</span></label>
            })}
            <button class="button primary" type="submit" data-test="budget-save">"Set budget"</button>
        </ActionForm>
        {move || set.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
    }
}

/// The month's statement: charges per tenant and pool, totals, terms,
/// and a tenant's slices.
#[component]
pub fn Statement(s: StatementView) -> impl IntoView {
    let csv_query = match (&s.tenant, &s.cost_centre) {
        (Some(t), _) => format!("tenant={}", encode_component(t)),
        (None, Some(cc)) => format!("cost_centre={}", encode_component(cc)),
        _ => String::new(),
    };
    let csv = format!("/api/v1/statements.csv?{csv_query}&month={}", s.month);
    let printable = format!("/statement?{csv_query}&month={}", s.month);
    let many_tenants = s.tenant.is_none();
    view! {
        <section class="card statement" data-test="statement">
            <div class="section-row">
                <h2 class="section-title">{format!("Statement {} · {}", s.month, s.subject)}</h2>
                <div class="row-actions no-print">
                    <a class="button ghost" href=printable data-test="statement-printable">"Printable"</a>
                    <a class="button ghost" href=csv data-test="statement-csv">"CSV"</a>
                </div>
            </div>
            <p class="muted small">
                {format!("{} to {}", s.from.format("%Y-%m-%d %H:%M"), s.to.format("%Y-%m-%d %H:%M UTC"))}
                {s.cost_centre.clone().map(|c| format!(" · cost centre {c}"))}
                {format!(" · made {}", format::when(s.generated_at))}
            </p>
            {if s.lines.is_empty() {
                view! { <p class="muted" data-test="statement-empty">"Nothing charged in this month: no slices in priced pools."</p> }.into_any()
            } else {
                view! {
                    <div class="table-scroll" tabindex="0" role="region" aria-label="Charges per pool">
                        <table class="small" data-test="statement-lines">
                            <thead><tr>
                                {many_tenants.then(|| view! { <th>"Tenant"</th> })}
                                <th>"Pool"</th><th class="num">"GPU-hours held"</th><th class="num">"Direct"</th><th class="num">"Overhead share"</th><th class="num">"Total"</th>
                            </tr></thead>
                            <tbody>{s.lines.iter().map(|l| view! {
                                <tr data-test="statement-line" data-pool=l.pool.clone()>
                                    {many_tenants.then(|| view! { <td>{l.tenant_name.clone()}</td> })}
                                    <td class="mono">{l.pool.clone()}</td>
                                    <td class="num">{format!("{:.4}", l.gpu_hours)}</td>
                                    <td class="num">{format!("{} {}", format::money(&l.direct), l.currency)}</td>
                                    <td class="num">{format!("{} {}", format::money(&l.overhead), l.currency)}</td>
                                    <td class="num" data-test="statement-line-total">{format!("{} {}", format::money(&l.total), l.currency)}</td>
                                </tr>
                            }).collect_view()}</tbody>
                            <tfoot>{s.totals.iter().map(|t| view! {
                                <tr data-test="statement-total" data-currency=t.currency.clone()>
                                    {many_tenants.then(|| view! { <th></th> })}
                                    <th>"Total"</th><th></th>
                                    <th class="num">{format!("{} {}", format::money(&t.direct), t.currency)}</th>
                                    <th class="num">{format!("{} {}", format::money(&t.overhead), t.currency)}</th>
                                    <th class="num" data-test="statement-total-amount">{format!("{} {}", format::money(&t.total), t.currency)}</th>
                                </tr>
                            }).collect_view()}</tfoot>
                        </table>
                    </div>
                }.into_any()
            }}
            {(!s.terms.is_empty()).then(|| view! {
                <h3 class="small">"Terms"</h3>
                <ul class="small muted" data-test="statement-terms">
                    {s.terms.iter().map(|t| view! {
                        <li>{format!("{}: {} per GPU-hour, {} from {}", t.pool, t.gpu_hour, t.policy.label(), t.from.format("%Y-%m-%d %H:%M UTC"))}</li>
                    }).collect_view()}
                </ul>
                <p class="small muted">"Direct: what your slices held (used-based pools: what they measurably used). Overhead share: full-recovery pools spread their free, stranded, draining, maintenance and unhealthy hours over the tenants by what they held; used-based pools spread the idle part of the slices by use; showback pools keep it with the platform."</p>
            })}
            {(!s.slices.is_empty()).then(|| view! {
                <h3 class="small">"Slices"</h3>
                <div class="table-scroll" tabindex="0" role="region" aria-label="Slices in the month">
                    <table class="small" data-test="statement-slices">
                        <thead><tr><th>"Slice"</th><th>"Shape"</th><th>"Pool"</th><th class="num">"GPU-hours"</th><th class="num">"Cost"</th></tr></thead>
                        <tbody>{s.slices.iter().map(|r| view! {
                            <tr>
                                <td class="mono">{r.allocation.map(|a| a.to_string()).unwrap_or_default()}</td>
                                <td class="mono">{r.shape.clone().unwrap_or_default()}</td>
                                <td class="mono">{r.pool.clone().unwrap_or_default()}</td>
                                <td class="num">{format!("{:.4}", r.gpu_hours)}</td>
                                <td class="num">{match &r.currency { Some(c) => format!("{} {c}", format::money(&r.cost)), None => "unpriced".to_owned() }}</td>
                            </tr>
                        }).collect_view()}</tbody>
                    </table>
                </div>
                <p class="small muted">"Slice costs are direct costs at the pools' prices (GPU-hours and GPU memory); the lines above add the overhead share. Amounts are rounded to cents here; the CSV and the API have them to the millionth."</p>
            })}
        </section>
    }
}

/// `/t/:slug/budget`: spend against budget, and the month's statement.
#[component]
pub fn BudgetPage() -> impl IntoView {
    let slug = super::path_slug();
    let query = use_query_map();
    let set = ServerAction::<SetBudget>::new();
    let delete = ServerAction::<DeleteBudget>::new();
    let ask = ServerAction::<RequestBudget>::new();
    let month = move || query.with(|q| q.get("month").unwrap_or_default());
    let page = Resource::new(
        {
            let slug = slug.clone();
            move || {
                (
                    slug.clone(),
                    month(),
                    set.version().get(),
                    delete.version().get(),
                    ask.version().get(),
                )
            }
        },
        |(slug, month, ..)| get_statement(slug, String::new(), month),
    );
    view! {
        <Title text="Budget & statement"/>
        <section class="page-head">
            <p class="eyebrow"><a href=format!("/t/{slug}")>{slug.clone()}</a></p>
            <h1>"Budget & statement"</h1>
            <p class="muted">"Spend is what the month charges your tenant so far: your slices' share of their GPUs at the pools' prices, plus your share of overhead where a pool recovers it. The forecast adds what the slices running now cost until the month ends."</p>
        </section>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(d) => {
                        let s = d.statement;
                        let slug = s.tenant.clone().unwrap_or_default();
                        let own = s.budgets.iter().find(|b| b.tenant.is_some()).cloned();
                        let may_set = d.platform_admin
                            || (d.tenant_admin && !own.as_ref().is_some_and(|b| b.block_when_exceeded));
                        let removable = own.clone().filter(|_| may_set).map(|b| b.id);
                        view! {
                            <form class="card form-row no-print" method="get" data-test="statement-month">
                                <label class="field"><span>"Month"</span><input type="month" name="month" value=s.month.clone()/></label>
                                <button class="button" type="submit">"Show"</button>
                            </form>
                            <section>
                                <h2 class="section-title">"Budget"</h2>
                                {if s.budgets.is_empty() {
                                    view! { <div class="card empty" data-test="budget-none"><p>"No budget yet."</p><p class="muted">"A monthly budget tells the tenant's admins at 80 % and 100 % of it, spent and forecast."</p></div> }.into_any()
                                } else {
                                    view! { <div class="grid budgets-grid">{s.budgets.iter().map(|b| view! { <BudgetCard b=b.clone()/> }).collect_view()}</div> }.into_any()
                                }}
                                {if may_set {
                                    view! {
                                        <div class="card no-print">
                                            <BudgetForm tenant=Some(slug.clone()) current=own platform_admin=d.platform_admin set/>
                                            {removable.map(|id| view! {
                                                <ActionForm action=delete attr:class="form-row" attr:data-test="budget-delete-form">
                                                    <input type="hidden" name="id" value=id.to_string()/>
                                                    <button class="button ghost danger" type="submit" data-test="budget-delete">"Remove budget"</button>
                                                </ActionForm>
                                            })}
                                        </div>
                                    }.into_any()
                                } else if let Some(b) = own.clone().filter(|b| b.block_when_exceeded && d.tenant_admin) {
                                    view! {
                                        <div class="card no-print" data-test="budget-ask">
                                            <p class="muted small">"This budget blocks requests once spent, so your platform admins set it. Ask them for more: another platform admin than the one who asks decides, and you are told."</p>
                                            {if b.pending_request.is_some() {
                                                view! { <p class="small" data-test="budget-ask-waiting">"Your request waits for the platform admins."</p> }.into_any()
                                            } else {
                                                view! {
                                                    <ActionForm action=ask attr:class="form-row" attr:data-test="budget-ask-form">
                                                        <input type="hidden" name="budget_id" value=b.id.to_string()/>
                                                        <label class="field"><span>"Per month"</span><input type="text" name="amount" required inputmode="decimal" placeholder=b.amount.clone() data-test="budget-ask-amount"/></label>
                                                        <label class="field grow"><span>"Why"</span><input type="text" name="reason" required maxlength="500" data-test="budget-ask-reason"/></label>
                                                        <button class="button primary" type="submit" data-test="budget-ask-send">"Ask for more"</button>
                                                    </ActionForm>
                                                }.into_any()
                                            }}
                                            {move || ask.value().get().and_then(Result::err).map(|err| view! { <FormError err/> })}
                                        </div>
                                    }.into_any()
                                } else {
                                    ().into_any()
                                }}
                            </section>
                            <Statement s/>
                        }.into_any()
                    }
                }
            })}
        </Suspense>
    }
}

/// `/statement?tenant=…|cost_centre=…&month=…`: the printable statement.
#[component]
pub fn StatementPage() -> impl IntoView {
    let query = use_query_map();
    let q = move || {
        query.with(|q| {
            (
                q.get("tenant").unwrap_or_default(),
                q.get("cost_centre").unwrap_or_default(),
                q.get("month").unwrap_or_default(),
            )
        })
    };
    let page = Resource::new(q, |(t, cc, m)| get_statement(t, cc, m));
    view! {
        <Title text="Statement"/>
        <p class="muted small no-print">"Print this page, or save it as PDF, with your browser's Print command; the navigation is left out."</p>
        <Suspense fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || Suspend::new(async move {
                match page.await {
                    Err(err) => view! { <ErrorPanel err/> }.into_any(),
                    Ok(d) => view! {
                        <section class="page-head">
                            <p class="eyebrow">"Monthly statement"</p>
                            <h1 data-test="statement-subject">{format!("{} · {}", d.statement.subject, d.statement.month)}</h1>
                        </section>
                        {(!d.statement.budgets.is_empty()).then(|| view! {
                            <div class="grid budgets-grid">{d.statement.budgets.iter().map(|b| view! { <BudgetCard b=b.clone()/> }).collect_view()}</div>
                        })}
                        <Statement s=d.statement/>
                    }.into_any(),
                }
            })}
        </Suspense>
    }
}
