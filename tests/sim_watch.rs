//! Watch semantics through kube-rs: resumption, bookmarks, `410 Gone` and
//! its recovery by `kube::runtime::watcher`, selector transitions,
//! paginated and streaming initial lists.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::common::{fast, next, start, until};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Binding, ConfigMap, ObjectReference, Pod};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::core::ObjectMeta;
use kube::runtime::watcher::{self, Event};
use muster::apiserver::fault::FaultRule;
use serde_json::json;

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test]
async fn resumes_from_a_version_and_sends_bookmarks() {
    let (cluster, client) = start(fast()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let a = cms
        .create(&PostParams::default(), &config_map("a", &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("b", &[]))
        .await
        .unwrap();
    cms.create(&PostParams::default(), &config_map("c", &[]))
        .await
        .unwrap();

    // Starting from a's version replays exactly what came after it.
    let rv = a.metadata.resource_version.unwrap();
    let wp = WatchParams {
        bookmarks: true,
        ..WatchParams::default()
    };
    let mut stream = cms.watch(&wp, &rv).await.unwrap().boxed();
    for expected in ["b", "c"] {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some(expected)),
            other => panic!("expected ADDED {expected}, got {other:?}"),
        }
    }
    let bookmark = until(&mut stream, |e| matches!(e, Ok(WatchEvent::Bookmark(_))))
        .await
        .unwrap();
    let WatchEvent::Bookmark(b) = bookmark else {
        unreachable!()
    };
    let latest = cms
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    assert_eq!(b.metadata.resource_version, latest);
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn too_old_version_is_410_gone() {
    let (cluster, client) = start(fast().history(5)).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = cms
        .create(&PostParams::default(), &config_map("first", &[]))
        .await
        .unwrap();
    for i in 0..10 {
        cms.create(&PostParams::default(), &config_map(&format!("n{i}"), &[]))
            .await
            .unwrap();
    }
    let rv = first.metadata.resource_version.unwrap();
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn runtime_watcher_recovers_from_gone() {
    // The watcher only matches `watched=yes`, sees no bookmarks (1 h
    // interval), and every watch is cut after 300 ms: after unrelated
    // churn overflows the 4-event history, its resume version is gone and
    // it must relist.
    let config = fast()
        .history(4)
        .bookmark_interval(Duration::from_secs(3600))
        .with_fault("watch-close-every=300ms".parse::<FaultRule>().unwrap());
    let (cluster, client) = start(config).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    cms.create(
        &PostParams::default(),
        &config_map("w0", &[("watched", "yes")]),
    )
    .await
    .unwrap();

    let cfg = watcher::Config::default().labels("watched=yes");
    let mut events = watcher::watcher(cms.clone(), cfg).boxed();
    until(&mut events, |e| matches!(e, Ok(Event::InitDone)))
        .await
        .unwrap();
    for i in 0..10 {
        cms.create(
            &PostParams::default(),
            &config_map(&format!("noise{i}"), &[]),
        )
        .await
        .unwrap();
    }
    // The next watch after the cut gets 410 and the watcher starts over.
    let gone = until(&mut events, |e| {
        matches!(e, Err(watcher::Error::WatchError(_)) | Ok(Event::Init))
    })
    .await;
    if let Err(watcher::Error::WatchError(status)) = &gone {
        assert_eq!(status.code, 410);
        until(&mut events, |e| matches!(e, Ok(Event::Init)))
            .await
            .unwrap();
    }
    let relisted = until(&mut events, |e| matches!(e, Ok(Event::InitApply(_))))
        .await
        .unwrap();
    let Event::InitApply(cm) = relisted else {
        unreachable!()
    };
    assert_eq!(cm.metadata.name.as_deref(), Some("w0"));
    until(&mut events, |e| matches!(e, Ok(Event::InitDone)))
        .await
        .unwrap();

    cms.create(
        &PostParams::default(),
        &config_map("w1", &[("watched", "yes")]),
    )
    .await
    .unwrap();
    let seen = until(&mut events, |e| matches!(e, Ok(Event::Apply(_))))
        .await
        .unwrap();
    let Event::Apply(cm) = seen else {
        unreachable!()
    };
    assert_eq!(cm.metadata.name.as_deref(), Some("w1"));
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn paginated_and_streaming_initial_lists() {
    let (cluster, client) = start(fast()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    for i in 0..5 {
        cms.create(&PostParams::default(), &config_map(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    for cfg in [
        watcher::Config::default().page_size(2),
        watcher::Config::default().streaming_lists(),
    ] {
        let mut events = watcher::watcher(cms.clone(), cfg).boxed();
        let mut names = BTreeSet::new();
        loop {
            match next(&mut events).await.unwrap() {
                Event::InitApply(cm) => {
                    names.insert(cm.metadata.name.unwrap());
                }
                Event::InitDone => break,
                _ => {}
            }
        }
        assert_eq!(names.len(), 5);
        cms.create(
            &PostParams::default(),
            &config_map(&format!("late{}", names.len()), &[]),
        )
        .await
        .ok();
        let late = until(&mut events, |e| matches!(e, Ok(Event::Apply(_))))
            .await
            .unwrap();
        assert!(
            matches!(late, Event::Apply(cm) if cm.metadata.name.as_deref().is_some_and(|n| n.starts_with("late")))
        );
        cms.delete("late5", &Default::default()).await.unwrap();
    }
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn leaving_a_field_selector_is_a_delete() {
    // kube-scheduler's pattern: watch unassigned pods; binding removes them.
    let config = fast()
        .with_nodes(1)
        .pod_start_delay(Duration::from_secs(3600));
    let (cluster, client) = start(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();

    let unassigned = WatchParams::default().fields("spec.nodeName=");
    let mut stream = pods.watch(&unassigned, "0").await.unwrap().boxed();
    assert!(matches!(
        next(&mut stream).await.unwrap(),
        WatchEvent::Added(_)
    ));
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some("p".into()),
            ..Default::default()
        },
        target: ObjectReference {
            name: Some("sim-node-0".into()),
            ..Default::default()
        },
    };
    let _: serde_json::Value = pods
        .create_subresource("binding", "p", &PostParams::default(), &binding)
        .await
        .unwrap();
    let bound_rv = pods.get("p").await.unwrap().metadata.resource_version;
    match next(&mut stream).await.unwrap() {
        // As from the API server's watch cache: the last state this watch
        // matched (no node yet), at the version of the binding.
        WatchEvent::Deleted(p) => {
            assert_eq!(p.spec.unwrap().node_name, None);
            assert_eq!(p.metadata.resource_version, bound_rv);
        }
        other => panic!("expected DELETED, got {other:?}"),
    }
    cluster.shutdown().await.unwrap();
}

/// kube-scheduler's pod watch: terminal pods are not cached.
const NOT_TERMINAL: &str = "status.phase!=Succeeded,status.phase!=Failed";

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "i"}]}}))
    .unwrap()
}

async fn set_phase(pods: &Api<Pod>, name: &str, phase: &str) -> Pod {
    let patch = Patch::Merge(json!({"status": {"phase": phase}}));
    pods.patch_status(name, &PatchParams::default(), &patch)
        .await
        .unwrap()
}

fn phase(p: &Pod) -> Option<&str> {
    p.status.as_ref().and_then(|s| s.phase.as_deref())
}

#[tokio::test]
async fn a_pod_that_finishes_leaves_a_phase_selector_as_a_delete() {
    let config = fast().pod_start_delay(Duration::from_secs(3600));
    let (cluster, client) = start(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client);
    for name in ["done", "failed", "running"] {
        pods.create(&PostParams::default(), &pod(name))
            .await
            .unwrap();
    }
    set_phase(&pods, "failed", "Failed").await;
    set_phase(&pods, "running", "Running").await;

    // A list with the selector leaves the terminal pod out.
    let names = |list: kube::core::ObjectList<Pod>| -> BTreeSet<String> {
        list.items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect()
    };
    let listed = pods
        .list(&ListParams::default().fields(NOT_TERMINAL))
        .await
        .unwrap();
    let rv = listed.metadata.resource_version.clone().unwrap();
    assert_eq!(
        names(listed),
        BTreeSet::from(["done".into(), "running".into()])
    );

    let wp = WatchParams::default().fields(NOT_TERMINAL);
    let mut stream = pods.watch(&wp, &rv).await.unwrap().boxed();
    // Still matching: MODIFIED.
    let modified = set_phase(&pods, "done", "Running").await;
    match next(&mut stream).await.unwrap() {
        WatchEvent::Modified(p) => assert_eq!(p.metadata, modified.metadata),
        other => panic!("expected MODIFIED done, got {other:?}"),
    }
    // Stops matching: DELETED, with the last state the watch saw at the
    // version of the change.
    let finished = set_phase(&pods, "done", "Succeeded").await;
    match next(&mut stream).await.unwrap() {
        WatchEvent::Deleted(p) => {
            assert_eq!(p.metadata.name.as_deref(), Some("done"));
            assert_eq!(phase(&p), Some("Running"));
            assert_eq!(
                p.metadata.resource_version,
                finished.metadata.resource_version
            );
        }
        other => panic!("expected DELETED done, got {other:?}"),
    }
    // Changes and the deletion of a non-matching pod are not seen; a pod
    // that starts matching again is ADDED.
    let label = Patch::Merge(json!({"metadata": {"labels": {"seen": "no"}}}));
    pods.patch("failed", &PatchParams::default(), &label)
        .await
        .unwrap();
    pods.delete("failed", &Default::default()).await.unwrap();
    set_phase(&pods, "done", "Pending").await;
    match next(&mut stream).await.unwrap() {
        WatchEvent::Added(p) => {
            assert_eq!(p.metadata.name.as_deref(), Some("done"));
            assert_eq!(phase(&p), Some("Pending"));
        }
        other => panic!("expected ADDED done, got {other:?}"),
    }
    let listed = pods
        .list(&ListParams::default().fields(NOT_TERMINAL))
        .await
        .unwrap();
    assert_eq!(
        names(listed),
        BTreeSet::from(["done".into(), "running".into()])
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_runtime_watcher_and_a_raw_watch_see_a_finished_pod_deleted() {
    let config = fast().pod_start_delay(Duration::from_secs(3600));
    let (cluster, client) = start(config).await;
    let pods: Api<Pod> = Api::default_namespaced(client.clone());
    pods.create(&PostParams::default(), &pod("job"))
        .await
        .unwrap();

    // kube::runtime::watcher, as the daemon's pod informer runs it.
    let cfg = watcher::Config::default().fields(NOT_TERMINAL);
    let mut events = watcher::watcher(pods.clone(), cfg).boxed();
    until(&mut events, |e| matches!(e, Ok(Event::InitDone)))
        .await
        .unwrap();
    // The raw HTTP watch, newline-delimited JSON.
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("watch", "true")
        .append_pair("fieldSelector", NOT_TERMINAL)
        .append_pair("resourceVersion", "0")
        .finish();
    let request = http::Request::get(format!("/api/v1/namespaces/default/pods?{query}"))
        .body(Vec::new())
        .unwrap();
    let raw = client.request_stream(request).await.unwrap();
    let mut lines = futures::io::AsyncBufReadExt::lines(raw).boxed();
    let mut raw_event = async || -> serde_json::Value {
        let line = next(&mut lines).await.unwrap();
        serde_json::from_str(&line).unwrap()
    };
    let added = raw_event().await;
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["metadata"]["name"], "job");

    let finished = set_phase(&pods, "job", "Succeeded").await;
    let deleted = until(&mut events, |e| matches!(e, Ok(Event::Delete(_))))
        .await
        .unwrap();
    let Event::Delete(p) = deleted else {
        unreachable!()
    };
    assert_eq!(p.metadata.name.as_deref(), Some("job"));
    assert_ne!(phase(&p), Some("Succeeded"));

    let deleted = raw_event().await;
    assert_eq!(deleted["type"], "DELETED", "{deleted}");
    assert_eq!(deleted["object"]["metadata"]["name"], "job");
    assert_ne!(deleted["object"]["status"]["phase"], "Succeeded");
    assert_eq!(
        deleted["object"]["metadata"]["resourceVersion"].as_str(),
        finished.metadata.resource_version.as_deref()
    );
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let (cluster, client) = start(fast()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let mut stream = cms
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    cluster.shutdown().await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .unwrap();
    assert!(end.is_none() || end.unwrap().is_err());
}

#[tokio::test]
async fn injected_faults_stall_a_watch_and_expire_resumes() {
    let (cluster, client) = start(fast()).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = cms
        .create(&PostParams::default(), &config_map("first", &[]))
        .await
        .unwrap();
    let rv = first.metadata.resource_version.unwrap();
    // A resume is told 410 while `resume-gone` is in force.
    cluster.set_faults(vec!["resume-gone=1".parse::<FaultRule>().unwrap()]);
    let mut stream = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(status) => assert_eq!(status.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    // A stalled watch holds its events until the stall is lifted; another
    // client's (by User-Agent) is not affected.
    cluster.set_faults(vec![
        "verb=watch,watch-stall=true,user-agent=stalled/"
            .parse::<FaultRule>()
            .unwrap(),
    ]);
    let mut live = cms
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    cms.create(&PostParams::default(), &config_map("second", &[]))
        .await
        .unwrap();
    match next(&mut live).await.unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("second")),
        other => panic!("expected the unstalled watch's ADDED, got {other:?}"),
    }
    cluster.set_faults(vec![
        "verb=watch,watch-stall=true".parse::<FaultRule>().unwrap(),
    ]);
    cms.create(&PostParams::default(), &config_map("third", &[]))
        .await
        .unwrap();
    let held = tokio::time::timeout(Duration::from_millis(300), next(&mut live)).await;
    assert!(held.is_err(), "a stalled watch delivers nothing");
    cluster.set_faults(Vec::new());
    match next(&mut live).await.unwrap() {
        WatchEvent::Added(cm) => assert_eq!(cm.metadata.name.as_deref(), Some("third")),
        other => panic!("expected the held ADDED, got {other:?}"),
    }
    cluster.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_watcher_that_falls_behind_is_closed_and_resumes_without_a_relist() {
    // The smallest watch buffer (16 events) and a stalled watch: 40 writes
    // overflow it.
    let (cluster, client) = start(fast().watch_buffer(16)).await;
    let cms: Api<ConfigMap> = Api::default_namespaced(client);
    let first = cms
        .create(&PostParams::default(), &config_map("first", &[]))
        .await
        .unwrap();
    let start_rv = first.metadata.resource_version.unwrap();
    let mut live = cms
        .watch(&WatchParams::default(), &start_rv)
        .await
        .unwrap()
        .boxed();
    // Once a write has come through, the watch is live (not replaying).
    cms.create(&PostParams::default(), &config_map("marker", &[]))
        .await
        .unwrap();
    let marker = until(&mut live, |e| matches!(e, Ok(WatchEvent::Added(_)))).await;
    let Ok(WatchEvent::Added(marker)) = marker else {
        unreachable!()
    };
    let mut last = marker.metadata.resource_version.unwrap();
    cluster.set_faults(vec![
        "verb=watch,watch-stall=true".parse::<FaultRule>().unwrap(),
    ]);
    for i in 0..40 {
        cms.create(&PostParams::default(), &config_map(&format!("cm{i}"), &[]))
            .await
            .unwrap();
    }
    cluster.set_faults(Vec::new());
    // What was delivered before the close, then the end: never an ERROR
    // (a real server closes an unresponsive watcher; a 410 would make
    // every client re-list everything).
    let mut seen = Vec::new();
    loop {
        let item = tokio::time::timeout(Duration::from_secs(10), live.next())
            .await
            .expect("the lagging watch ends in time");
        match item {
            None => break,
            Some(Ok(WatchEvent::Added(cm))) => {
                last = cm.metadata.resource_version.clone().unwrap();
                seen.push(cm.metadata.name.unwrap());
            }
            Some(Ok(WatchEvent::Bookmark(_))) => {}
            Some(other) => panic!("expected ADDED or the end, got {other:?}"),
        }
    }
    assert!(seen.len() < 40, "the watch was not closed: {seen:?}");
    // Resuming from the last version read replays the rest, in order.
    let mut resumed = cms
        .watch(&WatchParams::default(), &last)
        .await
        .unwrap()
        .boxed();
    while seen.len() < 40 {
        match next(&mut resumed).await.unwrap() {
            WatchEvent::Added(cm) => seen.push(cm.metadata.name.unwrap()),
            WatchEvent::Bookmark(_) => {}
            other => panic!("expected the missed ADDED, got {other:?}"),
        }
    }
    let expected: Vec<String> = (0..40).map(|i| format!("cm{i}")).collect();
    assert_eq!(seen, expected);
    cluster.shutdown().await.unwrap();
}
