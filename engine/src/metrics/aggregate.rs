//! Aggregating one metric over subtasks (Flink's `agg=min,max,avg,sum` of the REST API).

use std::str::FromStr;

/// One of Flink's aggregations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregation {
    /// The least value.
    Min,
    /// The greatest value.
    Max,
    /// The mean.
    Avg,
    /// The total.
    Sum,
    /// Flink's skew: (max - avg) / max × 100, 0 when the max is 0.
    Skew,
}

impl Aggregation {
    /// Every aggregation, in Flink's order (what `agg` defaults to).
    pub const ALL: [Aggregation; 5] = [
        Aggregation::Min,
        Aggregation::Max,
        Aggregation::Avg,
        Aggregation::Sum,
        Aggregation::Skew,
    ];

    /// Flink's JSON field name.
    pub fn name(self) -> &'static str {
        match self {
            Aggregation::Min => "min",
            Aggregation::Max => "max",
            Aggregation::Avg => "avg",
            Aggregation::Sum => "sum",
            Aggregation::Skew => "skew",
        }
    }

    /// Parses a comma-separated `agg` parameter; an unknown name is an error naming it.
    pub fn parse_list(raw: &str) -> Result<Vec<Aggregation>, String> {
        raw.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::parse)
            .collect()
    }
}

impl FromStr for Aggregation {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Aggregation::ALL
            .into_iter()
            .find(|a| a.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                format!("unknown aggregation '{s}': expected min, max, avg, sum or skew")
            })
    }
}

/// The aggregates of a set of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aggregate {
    /// The least value.
    pub min: f64,
    /// The greatest value.
    pub max: f64,
    /// The total.
    pub sum: f64,
    /// How many values.
    pub count: usize,
}

impl Aggregate {
    /// The aggregates of `values`; `None` for none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Aggregate> {
        values.into_iter().fold(None, |acc, v| {
            Some(match acc {
                None => Aggregate {
                    min: v,
                    max: v,
                    sum: v,
                    count: 1,
                },
                Some(a) => Aggregate {
                    min: a.min.min(v),
                    max: a.max.max(v),
                    sum: a.sum + v,
                    count: a.count + 1,
                },
            })
        })
    }

    /// The value of one aggregation.
    pub fn get(&self, aggregation: Aggregation) -> f64 {
        let avg = self.sum / self.count.max(1) as f64;
        match aggregation {
            Aggregation::Min => self.min,
            Aggregation::Max => self.max,
            Aggregation::Avg => avg,
            Aggregation::Sum => self.sum,
            Aggregation::Skew if self.max == 0.0 => 0.0,
            Aggregation::Skew => (self.max - avg) / self.max * 100.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregates_of_values() {
        let a = Aggregate::of([3.0, 1.0, 8.0]).unwrap();
        assert_eq!(a.get(Aggregation::Min), 1.0);
        assert_eq!(a.get(Aggregation::Max), 8.0);
        assert_eq!(a.get(Aggregation::Sum), 12.0);
        assert_eq!(a.get(Aggregation::Avg), 4.0);
        assert_eq!(a.get(Aggregation::Skew), 50.0);
        assert!(Aggregate::of([]).is_none());
        assert_eq!(Aggregate::of([0.0]).unwrap().get(Aggregation::Skew), 0.0);
    }

    #[test]
    fn parses_the_agg_parameter() {
        assert_eq!(
            Aggregation::parse_list("min, SUM").unwrap(),
            [Aggregation::Min, Aggregation::Sum]
        );
        let err = Aggregation::parse_list("min,median").unwrap_err();
        assert!(err.contains("'median'"), "{err}");
    }
}
