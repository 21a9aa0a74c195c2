//! The stage times of one prefill (host/src/moe/prefill.rs records an event between stages).

/// GPU milliseconds of each stage of one prefill, from events recorded between them: route,
/// scatter, tiles (the work list, on the device or the host), the path's stages, combine.
#[derive(Clone, Debug, Default)]
pub struct StageTimes {
    pub names: Vec<&'static str>,
    pub ms: Vec<f64>,
    pub total: f64,
}

/// The pipeline's own stages before the path's, and after.
pub(super) const PRE_STAGES: [&str; 3] = ["route", "scatter", "tiles"];
pub(super) const POST_STAGES: [&str; 1] = ["combine"];

impl StageTimes {
    /// Milliseconds of the stage named `name`, where the run had one.
    pub fn stage(&self, name: &str) -> Option<f64> {
        self.names
            .iter()
            .position(|&n| n == name)
            .and_then(|i| self.ms.get(i).copied())
    }

    /// Milliseconds of the expert path's stages (between the pipeline's own).
    pub fn path_ms(&self) -> f64 {
        let end = self.ms.len().saturating_sub(POST_STAGES.len());
        self.ms
            .get(PRE_STAGES.len()..end)
            .map_or(0.0, |v| v.iter().sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stage_times_by_name_and_the_paths_share() {
        let t = StageTimes {
            names: vec![
                "route",
                "scatter",
                "tiles",
                "gate_up",
                "swiglu_quant",
                "down",
                "combine",
            ],
            ms: vec![0.0, 0.1, 0.02, 1.5, 0.25, 0.75, 0.125],
            total: 2.745,
        };
        assert_eq!(t.stage("gate_up"), Some(1.5));
        assert_eq!(t.stage("experts (fused)"), None);
        assert_eq!(t.path_ms(), 2.5);
        assert_eq!(StageTimes::default().path_ms(), 0.0);
    }
}
