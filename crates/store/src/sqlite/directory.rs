use async_trait::async_trait;
use netacl_model::{Connection, DirectoryData, GroupId};
use rusqlite::{params, OptionalExtension, Transaction};
use serde_json::Value;

use super::SqliteStore;
use crate::{DirectoryStore, ImportReport, Page, StoreError, TenantId};

/// Counts one upserted record: `existing` is the stored content (if any), `record` the new one;
/// `write` stores the new content and runs only when it differs.
fn upsert(
    report: &mut ImportReport,
    existing: Option<String>,
    record: &str,
    write: impl FnOnce() -> rusqlite::Result<usize>,
) -> Result<(), StoreError> {
    match existing {
        Some(old) if old == record => report.unchanged += 1,
        Some(_) => {
            write()?;
            report.updated += 1;
        }
        None => {
            write()?;
            report.inserted += 1;
        }
    }
    Ok(())
}

fn import(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    data: &DirectoryData,
) -> Result<ImportReport, StoreError> {
    let t = tenant.as_str();
    let mut report = ImportReport::default();
    for (i, c) in data.connections.iter().enumerate() {
        let holder: Option<String> = tx
            .query_row(
                "SELECT id FROM connections WHERE tenant_id = ?1 AND name = ?2 AND id <> ?3",
                params![t, c.name, c.id],
                |row| row.get(0),
            )
            .optional()?;
        if let Some(holder) = holder {
            return Err(StoreError::NameTaken(format!(
                "connections[{i}].name: {} is the name of stored connection {holder}",
                c.name
            )));
        }
        let record = c.to_json().to_string();
        let existing = tx
            .query_row(
                "SELECT record FROM connections WHERE tenant_id = ?1 AND id = ?2",
                params![t, c.id],
                |row| row.get(0),
            )
            .optional()?;
        upsert(&mut report, existing, &record, || {
            tx.execute(
                "INSERT INTO connections (tenant_id, id, name, strategy, record)
                 VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT (tenant_id, id) DO UPDATE
                 SET name = excluded.name, strategy = excluded.strategy, record = excluded.record",
                params![t, c.id, c.name, c.strategy, record],
            )
        })?;
    }
    for u in &data.users {
        let record = u.record.to_string();
        let existing = tx
            .query_row(
                "SELECT record FROM directory_users WHERE tenant_id = ?1 AND user_id = ?2",
                params![t, u.user_id],
                |row| row.get(0),
            )
            .optional()?;
        upsert(&mut report, existing, &record, || {
            tx.execute(
                "INSERT INTO directory_users (tenant_id, user_id, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tenant_id, user_id) DO UPDATE SET record = excluded.record",
                params![t, u.user_id, record],
            )
        })?;
    }
    for g in &data.groups {
        let record = g.record.to_string();
        let existing = tx
            .query_row(
                "SELECT record FROM directory_groups WHERE tenant_id = ?1 AND id = ?2",
                params![t, g.id.as_str()],
                |row| row.get(0),
            )
            .optional()?;
        upsert(&mut report, existing, &record, || {
            tx.execute(
                "INSERT INTO directory_groups (tenant_id, id, record) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tenant_id, id) DO UPDATE SET record = excluded.record",
                params![t, g.id.as_str(), record],
            )
        })?;
    }
    for m in &data.members {
        let record = m.record.to_string();
        let existing = tx
            .query_row(
                "SELECT record FROM group_members
                 WHERE tenant_id = ?1 AND group_id = ?2 AND member_id = ?3",
                params![t, m.group_id.as_str(), m.member_id],
                |row| row.get(0),
            )
            .optional()?;
        upsert(&mut report, existing, &record, || {
            tx.execute(
                "INSERT INTO group_members (tenant_id, group_id, member_id, record)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tenant_id, group_id, member_id) DO UPDATE SET record = excluded.record",
                params![t, m.group_id.as_str(), m.member_id, record],
            )
        })?;
    }
    for s in &data.sessions {
        let record = s.record.to_string();
        let existing = tx
            .query_row(
                "SELECT record FROM user_sessions WHERE tenant_id = ?1 AND id = ?2",
                params![t, s.id],
                |row| row.get(0),
            )
            .optional()?;
        upsert(&mut report, existing, &record, || {
            tx.execute(
                "INSERT INTO user_sessions (tenant_id, id, user_id, record) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (tenant_id, id) DO UPDATE
                 SET user_id = excluded.user_id, record = excluded.record",
                params![t, s.id, s.user_id, record],
            )
        })?;
    }
    Ok(report)
}

/// Reads `(seq, record)` rows into a page of at most `limit` records.
fn page(
    tx: &Transaction<'_>,
    tenant: &TenantId,
    sql: &str,
    owner: &str,
    after: Option<u64>,
    limit: u32,
) -> Result<Page, StoreError> {
    let after = after.map_or(0, |a| i64::try_from(a).unwrap_or(i64::MAX));
    let mut stmt = tx.prepare(sql)?;
    let rows = stmt.query_map(
        params![tenant.as_str(), owner, after, i64::from(limit) + 1],
        |row| Ok((row.get::<_, i64>(0)?, row.get::<_, String>(1)?)),
    )?;
    let mut items = Vec::with_capacity(limit as usize);
    let mut last = None;
    let mut more = false;
    for row in rows {
        let (seq, record) = row?;
        if items.len() == limit as usize {
            more = true;
            break;
        }
        let value: Value = serde_json::from_str(&record).map_err(|err| StoreError::Corrupt {
            tenant: tenant.to_string(),
            id: format!("{owner} #{seq}"),
            reason: err.to_string(),
        })?;
        items.push(value);
        last = Some(super::to_version(seq));
    }
    Ok(Page {
        items,
        next_after: if more { last } else { None },
        total: None,
    })
}

#[async_trait]
impl DirectoryStore for SqliteStore {
    async fn import_directory(
        &self,
        tenant: &TenantId,
        data: &DirectoryData,
    ) -> Result<ImportReport, StoreError> {
        let (tenant, data) = (tenant.clone(), data.clone());
        self.write(move |conn, _| {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            let report = import(&tx, &tenant, &data)?;
            tx.commit()?;
            Ok(report)
        })
        .await
    }

    async fn connections(&self, tenant: &TenantId) -> Result<Vec<Connection>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn, _| {
            let mut stmt = conn.prepare(
                "SELECT id, name, strategy FROM connections WHERE tenant_id = ?1 ORDER BY name",
            )?;
            let rows = stmt.query_map([tenant.as_str()], |row| {
                Ok(Connection {
                    id: row.get(0)?,
                    name: row.get(1)?,
                    strategy: row.get(2)?,
                })
            })?;
            Ok(rows.collect::<Result<Vec<_>, _>>()?)
        })
        .await
    }

    async fn group_members(
        &self,
        tenant: &TenantId,
        group: &GroupId,
        after: Option<u64>,
        limit: u32,
    ) -> Result<Option<Page>, StoreError> {
        let (tenant, group) = (tenant.clone(), group.clone());
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            let exists = tx
                .query_row(
                    "SELECT 1 FROM directory_groups WHERE tenant_id = ?1 AND id = ?2",
                    params![tenant.as_str(), group.as_str()],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if !exists {
                return Ok(None);
            }
            let page = page(
                &tx,
                &tenant,
                "SELECT seq, record FROM group_members
                 WHERE tenant_id = ?1 AND group_id = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
                group.as_str(),
                after,
                limit,
            )?;
            tx.commit()?;
            Ok(Some(page))
        })
        .await
    }

    async fn user_sessions(
        &self,
        tenant: &TenantId,
        user_id: &str,
        after: Option<u64>,
        limit: u32,
        with_total: bool,
    ) -> Result<Option<Page>, StoreError> {
        let (tenant, user_id) = (tenant.clone(), user_id.to_owned());
        self.read(move |conn, _| {
            let tx = conn.transaction()?;
            let exists = tx
                .query_row(
                    "SELECT 1 FROM directory_users WHERE tenant_id = ?1 AND user_id = ?2",
                    params![tenant.as_str(), user_id],
                    |_| Ok(()),
                )
                .optional()?
                .is_some();
            if !exists {
                return Ok(None);
            }
            let mut page = page(
                &tx,
                &tenant,
                "SELECT seq, record FROM user_sessions
                 WHERE tenant_id = ?1 AND user_id = ?2 AND seq > ?3 ORDER BY seq LIMIT ?4",
                &user_id,
                after,
                limit,
            )?;
            if with_total {
                let total: i64 = tx.query_row(
                    "SELECT COUNT(*) FROM user_sessions WHERE tenant_id = ?1 AND user_id = ?2",
                    params![tenant.as_str(), user_id],
                    |row| row.get(0),
                )?;
                page.total = Some(super::to_version(total));
            }
            tx.commit()?;
            Ok(Some(page))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use netacl_model::{
        BrandingPatch, DirectoryData, GroupId, Limits, Organization, OrganizationId,
        OrganizationSpec,
    };
    use serde_json::{json, Value};

    use crate::{SqliteStore, Store, StoreError, TenantId};

    const T: &str = "2026-01-02T03:04:05.678Z";
    const GROUP: &str = "grp_2ZbGfPu9TCHmbkDc";
    const CONN: &str = "con_AAAAAAAAAAAAAAAA";

    async fn fresh() -> (tempfile::TempDir, Arc<dyn Store>, TenantId) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(dir.path(), Limits::default()).expect("open"));
        let tenant = TenantId::default_tenant();
        store
            .ensure_tenant(&tenant, "localhost:8080")
            .await
            .expect("tenant");
        (dir, store, tenant)
    }

    /// A group with members `first..last` and a user with sessions `first..last`.
    fn data(first: usize, last: usize) -> DirectoryData {
        let members: Vec<Value> = (first..last)
            .map(|i| {
                json!({"group_id": GROUP, "id": format!("auth0|{i}"), "member_type": "user",
                            "type": "connection", "connection_id": CONN, "created_at": T})
            })
            .collect();
        let users: Vec<Value> = (first..last)
            .map(|i| json!({"user_id": format!("auth0|{i}")}))
            .collect();
        let sessions: Vec<Value> = (first..last)
            .map(|i| {
                json!({"id": format!("s{i}"), "user_id": "auth0|0", "created_at": T,
                            "updated_at": T, "authenticated_at": T})
            })
            .collect();
        let mut users = users;
        users.push(json!({"user_id": "auth0|0"}));
        DirectoryData::from_json(&json!({
            "connections": [{"id": CONN, "name": "db", "strategy": "auth0"}],
            "users": users,
            "groups": [{"id": GROUP, "name": "eng"}],
            "members": members,
            "sessions": sessions
        }))
        .expect("valid directory data")
    }

    #[tokio::test]
    async fn import_is_idempotent_and_pages_stay_stable_while_members_are_added() {
        let (_dir, store, tenant) = fresh().await;
        let first = store
            .import_directory(&tenant, &data(1, 120))
            .await
            .expect("import");
        assert_eq!(first.inserted, 1 + 120 + 1 + 119 + 119);
        let again = store
            .import_directory(&tenant, &data(1, 120))
            .await
            .expect("import");
        assert_eq!((again.inserted, again.updated), (0, 0));
        assert_eq!(again.unchanged, first.inserted);

        let group = GroupId::parse(GROUP).expect("group id");
        let mut seen = Vec::new();
        let mut after = None;
        for round in 0..20 {
            let page = store
                .group_members(&tenant, &group, after, 25)
                .await
                .expect("page")
                .expect("group exists");
            seen.extend(
                page.items
                    .iter()
                    .map(|m| m["id"].as_str().unwrap_or("").to_owned()),
            );
            if round == 1 {
                // Members added between pages come after every existing one.
                store
                    .import_directory(&tenant, &data(120, 140))
                    .await
                    .expect("import more");
            }
            match page.next_after {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        let expected: Vec<String> = (1..140).map(|i| format!("auth0|{i}")).collect();
        assert_eq!(seen, expected);
    }

    #[tokio::test]
    async fn sessions_page_with_totals_and_unknown_owners_are_none() {
        let (_dir, store, tenant) = fresh().await;
        store
            .import_directory(&tenant, &data(1, 8))
            .await
            .expect("import");
        let page = store
            .user_sessions(&tenant, "auth0|0", None, 5, true)
            .await
            .expect("page")
            .expect("user exists");
        assert_eq!((page.items.len(), page.total), (5, Some(7)));
        let rest = store
            .user_sessions(&tenant, "auth0|0", page.next_after, 5, false)
            .await
            .expect("page")
            .expect("user exists");
        assert_eq!(
            (rest.items.len(), rest.next_after, rest.total),
            (2, None, None)
        );
        assert_eq!(rest.items[1]["id"], "s7");
        let none = store
            .user_sessions(&tenant, "auth0|1", None, 5, true)
            .await
            .expect("page")
            .expect("user exists");
        assert_eq!((none.items.len(), none.total), (0, Some(0)));
        assert!(store
            .user_sessions(&tenant, "auth0|nobody", None, 5, false)
            .await
            .expect("read")
            .is_none());
        let unknown = GroupId::parse("grp_9ZbGfPu9TCHmbkDc").expect("group id");
        assert!(store
            .group_members(&tenant, &unknown, None, 5)
            .await
            .expect("read")
            .is_none());
    }

    #[tokio::test]
    async fn a_connection_name_held_by_another_id_refuses_the_whole_import() {
        let (_dir, store, tenant) = fresh().await;
        store
            .import_directory(&tenant, &data(1, 3))
            .await
            .expect("import");
        let clash = DirectoryData::from_json(&json!({
            "users": [{"user_id": "auth0|new"}],
            "connections": [{"id": "con_BBBBBBBBBBBBBBBB", "name": "db", "strategy": "auth0"}]
        }))
        .expect("valid");
        let err = store.import_directory(&tenant, &clash).await.unwrap_err();
        assert!(matches!(&err, StoreError::NameTaken(m) if m.starts_with("connections[0].name")));
        // All or nothing: the user of the refused file was not written.
        assert!(store
            .user_sessions(&tenant, "auth0|new", None, 1, false)
            .await
            .expect("read")
            .is_none());
    }

    fn org(seed: u128, body: Value) -> Organization {
        Organization {
            id: OrganizationId::from_random(seed),
            spec: OrganizationSpec::from_json(&body).expect("valid organization"),
        }
    }

    #[tokio::test]
    async fn organization_names_are_unique_and_connections_must_exist() {
        let (_dir, store, tenant) = fresh().await;
        store
            .import_directory(&tenant, &data(1, 2))
            .await
            .expect("import");
        let with_conn = org(
            1,
            json!({"name": "acme", "enabled_connections": [{"connection_id": CONN}]}),
        );
        let conns = store
            .create_organization(&tenant, &with_conn)
            .await
            .expect("create");
        assert_eq!(
            (conns[0].name.as_str(), conns[0].strategy.as_str()),
            ("db", "auth0")
        );
        let twin = org(2, json!({"name": "acme"}));
        assert!(matches!(
            store.create_organization(&tenant, &twin).await,
            Err(StoreError::NameTaken(_))
        ));
        let unknown = org(
            3,
            json!({"name": "beta", "enabled_connections": [{"connection_id": CONN},
                                                         {"connection_id": "con_ZZZZZZZZZZZZZZZZ"}]}),
        );
        assert!(matches!(
            store.create_organization(&tenant, &unknown).await,
            Err(StoreError::UnknownConnection(id)) if id == "con_ZZZZZZZZZZZZZZZZ"
        ));
        // Nothing of the refused create was written: the name is still free.
        store
            .create_organization(&tenant, &org(4, json!({"name": "beta"})))
            .await
            .expect("name still free");
    }

    #[tokio::test]
    async fn branding_merges_and_survives_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tenant = TenantId::default_tenant();
        {
            let store = SqliteStore::open(dir.path(), Limits::default()).expect("open");
            crate::TenantStore::ensure_tenant(&store, &tenant, "localhost:8080")
                .await
                .expect("tenant");
            let patch = |v: Value| BrandingPatch::from_json(&v).expect("valid patch");
            use crate::BrandingStore;
            store
                .update_branding(&tenant, &patch(json!({"colors": {"primary": "#111"}, "logo_url": "https://x.example/l.png"})))
                .await
                .expect("update");
            let merged = store
                .update_branding(
                    &tenant,
                    &patch(json!({"colors": {"page_background": "#222"}, "logo_url": null})),
                )
                .await
                .expect("update");
            assert_eq!(
                merged.to_json(),
                json!({"colors": {"primary": "#111", "page_background": "#222"}, "logo_url": null})
            );
        }
        let store = SqliteStore::open(dir.path(), Limits::default()).expect("reopen");
        let stored = crate::BrandingStore::branding(&store, &tenant)
            .await
            .expect("read");
        assert_eq!(
            stored.to_json(),
            json!({"colors": {"primary": "#111", "page_background": "#222"}, "logo_url": null})
        );
    }
}
