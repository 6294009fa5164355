//! Who may receive network ACL key material: only a client given
//! [`KEY_MATERIAL_SCOPE`](crate::KEY_MATERIAL_SCOPE) explicitly, an edge client
//! (`POST /_netacl/v1/tenants/{id}/edge-clients`). A bootstrap client is created without it, and
//! one stored with it by an earlier version loses it when its tenant is loaded: the stored
//! scopes are rewritten (logged once per client), so every node and every listing agrees.
use std::sync::Arc;

use netacl_store::{Store, StoreError, StoredClient, TenantId};

use crate::auth::{is_bootstrap, KEY_MATERIAL_SCOPE};

/// Removes [`KEY_MATERIAL_SCOPE`] from the stored bootstrap clients among `clients` (in the
/// store and in `clients`).
pub(crate) async fn drop_from_bootstrap_clients(
    store: &Arc<dyn Store>,
    tenant: &TenantId,
    clients: &mut [StoredClient],
) -> Result<(), StoreError> {
    for client in clients.iter_mut() {
        let holds = client.scopes.iter().any(|s| s == KEY_MATERIAL_SCOPE);
        if !holds || !is_bootstrap(&client.scopes) {
            continue;
        }
        let mut migrated = client.clone();
        migrated.scopes.retain(|s| s != KEY_MATERIAL_SCOPE);
        store.put_client(tenant, &migrated).await?;
        tracing::warn!(
            %tenant,
            client_id = %client.client_id,
            "removed read:network_acl_key_material from the bootstrap client (key material goes \
             only to a client given the scope: create an edge client with \
             POST /_netacl/v1/tenants/{{id}}/edge-clients)"
        );
        *client = migrated;
    }
    Ok(())
}
