//! A fixed number of slots per tenant: what keeps one tenant's many requests (or CPU tasks) from
//! taking another tenant's share. Tenants come from the configured keys, so the map is bounded.

use crate::domain::TenantId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

pub struct TenantSlots {
    per_tenant: usize,
    tenants: Mutex<HashMap<TenantId, Arc<Semaphore>>>,
}

impl TenantSlots {
    pub fn new(per_tenant: usize) -> Self {
        Self {
            per_tenant: per_tenant.max(1),
            tenants: Mutex::default(),
        }
    }

    /// The tenant's slots (made on its first use).
    pub fn of(&self, tenant: &TenantId) -> Arc<Semaphore> {
        let mut tenants = self.tenants.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slots) = tenants.get(tenant) {
            return slots.clone();
        }
        let slots = Arc::new(Semaphore::new(self.per_tenant));
        tenants.insert(tenant.clone(), slots.clone());
        slots
    }
}
