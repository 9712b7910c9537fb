//! End-to-end: the simulated cluster and `muster run` (in-process), talking
//! only over HTTP. Each test is one scenario of the daemon's contract.

mod e2e;

use e2e::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gang_that_fits_is_bound_together_and_condition_turns_true() {
    let env = cluster(vec![nodes(4, "4")]).await;
    let daemon = daemon(&env, test_config("")).await;
    create_podgroup(&env, "default", "train", 4, None).await;
    create_pods(
        &env,
        "default",
        (0..4)
            .map(|i| pod(&format!("train-{i}"), "2", "muster", Some("train")))
            .collect(),
    )
    .await;

    let pods = wait_pods(&env, "default", |p| names_bound(p, "train-").len() == 4).await;
    assert_eq!(names_bound(&pods, "train-").len(), 4);
    let cond = wait_podgroup_condition(&env, "default", "train", |c| c["status"] == "True").await;
    assert_eq!(cond["reason"], "Scheduled");
    daemon.shutdown().await.expect("clean shutdown");
}
