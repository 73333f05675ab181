//! Where the IdP sends the browser after logout.

use leptos::prelude::*;
use leptos_meta::Title;

/// "You are signed out."
#[component]
pub fn SignedOutPage() -> impl IntoView {
    view! {
        <Title text="Signed out"/>
        <section class="card narrow" data-test="signed-out">
            <h1>"You are signed out"</h1>
            <p class="muted">"Your Tessera session has ended. Your GPU slices keep running until their lease ends or you release them."</p>
            <p><a class="button" href="/auth/login" rel="external" data-test="sign-in-again">"Sign in again"</a></p>
        </section>
    }
}
