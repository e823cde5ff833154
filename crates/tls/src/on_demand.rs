//! On-demand certificates: the hook through which a handshake for a name without a certificate
//! asks for one (the ACME manager answers it), and the slot listeners read it from, so that the
//! manager a reload starts serves the listeners made before it.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, RwLock};

/// Obtains a certificate for a name at its first handshake.
pub trait OnDemand: Send + Sync {
    /// Whether a certificate for `name` (normalised) is now in the store: the name was allowed
    /// and its order succeeded (or another node's did). `false` at once for a name refused, over
    /// the rate, or not a name a CA issues for.
    fn obtain<'a>(&'a self, name: &'a str) -> Pin<Box<dyn Future<Output = bool> + Send + 'a>>;
}

/// Where listeners find the current [`OnDemand`] hook.
#[derive(Default)]
pub struct OnDemandSlot {
    hook: RwLock<Option<Arc<dyn OnDemand>>>,
}

impl std::fmt::Debug for OnDemandSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnDemandSlot").field("set", &self.get().is_some()).finish()
    }
}

impl OnDemandSlot {
    /// The hook now, if any.
    pub fn get(&self) -> Option<Arc<dyn OnDemand>> {
        self.hook.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the hook.
    pub fn set(&self, hook: Option<Arc<dyn OnDemand>>) {
        *self.hook.write().unwrap_or_else(|p| p.into_inner()) = hook;
    }
}
