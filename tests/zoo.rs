use topoplace::graph::Phase;
use topoplace::zoo::{self, ZooOptions};

#[test]
fn probe() {
    for name in zoo::NAMES {
        let g = zoo::build(name, &ZooOptions::default()).unwrap();
        let s = g.summary();
        let fwd: f64 = g
            .ops()
            .iter()
            .filter(|o| o.phase == Phase::Forward)
            .map(|o| o.flops)
            .sum();
        let bwd: f64 = g
            .ops()
            .iter()
            .filter(|o| o.phase == Phase::Backward)
            .map(|o| o.flops)
            .sum();
        let c = zoo::card(name).unwrap();
        let macs = fwd / g.batch_size as f64 / 2.0;
        println!(
            "{name:14} ops {:6} params {:11} ref {:11} macs {:.4e} ref {:.4e} bwd/fwd {:.3}",
            s.ops,
            s.params,
            c.reference_params,
            macs,
            c.reference_fwd_macs_per_sample,
            bwd / fwd
        );
    }
}
