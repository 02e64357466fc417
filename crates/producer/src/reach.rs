//! Whether the brokers can be reached, said in words at a modest rate.
//!
//! librdkafka retries connections on its own and says why they fail only through its error
//! callback (`Connect to ipv4#127.0.0.1:1 failed: Connection refused`), once per new reason: a
//! client that never reaches a broker otherwise shows nothing until its operation times out.
//! A [`BrokerWatch`] takes those errors from every client of a process and says them — at once
//! the first time, again every `every` while the brokers stay out of reach (with the latest
//! reason), and once more when they answer again. Who hears it (a log line, stderr) is the
//! process's choice.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a lasting trouble is said again.
pub const REPEAT_EVERY: Duration = Duration::from_secs(10);

/// Why the brokers cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trouble {
    /// No connection: refused, unresolvable, dropped, no answer.
    Unreachable,
    /// A connection, but its security handshake failed: TLS, SASL mechanism, credentials.
    Authentication,
}

impl Trouble {
    /// The trouble a client error names, if it is one of connectivity or authentication.
    pub fn of(error: &KafkaError) -> Option<Trouble> {
        Some(match error.rdkafka_error_code()? {
            RDKafkaErrorCode::BrokerTransportFailure
            | RDKafkaErrorCode::AllBrokersDown
            | RDKafkaErrorCode::Resolve
            | RDKafkaErrorCode::NetworkException
            | RDKafkaErrorCode::BrokerNotAvailable => Trouble::Unreachable,
            RDKafkaErrorCode::Authentication
            | RDKafkaErrorCode::SaslAuthenticationFailed
            | RDKafkaErrorCode::SSL
            | RDKafkaErrorCode::UnsupportedSASLMechanism
            | RDKafkaErrorCode::IllegalSASLState => Trouble::Authentication,
            _ => return None,
        })
    }

    /// The trouble, in words: "cannot reach the Kafka brokers", ….
    pub fn what(self) -> &'static str {
        match self {
            Trouble::Unreachable => "cannot reach the Kafka brokers",
            Trouble::Authentication => "cannot authenticate to the Kafka brokers",
        }
    }

    /// What to check, in words.
    pub fn advice(self) -> &'static str {
        match self {
            Trouble::Unreachable => {
                "check --brokers (TOOLCALLS_BROKERS, `brokers` in the config file), that the brokers \
                 run and that this host can reach them, and that --kafka security.protocol matches \
                 their listener (a broker that requires TLS or SASL drops a plain connection)"
            }
            Trouble::Authentication => {
                "check the security settings given with --kafka (security.protocol, sasl.mechanism, \
                 sasl.username, sasl.password, ssl.*) against the brokers' listener"
            }
        }
    }
}

/// What a [`BrokerWatch`] has to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// The brokers cannot be used: said when it starts (`first`), then every
    /// [`REPEAT_EVERY`] while it lasts.
    Trouble {
        trouble: Trouble,
        brokers: String,
        /// librdkafka's words.
        reason: String,
        /// How long it has lasted.
        since: Duration,
        first: bool,
    },
    /// They answer again.
    Recovered { brokers: String, after: Duration },
}

impl Notice {
    /// True for a trouble, false for a recovery.
    pub fn is_trouble(&self) -> bool {
        matches!(self, Notice::Trouble { .. })
    }
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Trouble {
                trouble,
                brokers,
                reason,
                since,
                first,
            } => {
                let still = if *first { "" } else { "still " };
                write!(f, "{still}{} at {brokers}", trouble.what())?;
                if !*first {
                    write!(f, " ({}s)", since.as_secs())?;
                }
                write!(f, ": {reason}; {}", trouble.advice())
            }
            Notice::Recovered { brokers, after } => write!(
                f,
                "the Kafka brokers at {brokers} answer again, after {}s",
                after.as_secs()
            ),
        }
    }
}

struct Down {
    trouble: Trouble,
    reason: String,
    /// The reason says little ("1/1 brokers are down", "no answer"): a better one is said at once.
    vague: bool,
    since: Instant,
    /// When it was last said; `None` while not yet said.
    said: Option<Instant>,
}

#[derive(Default)]
struct State {
    down: Option<Down>,
    /// The last connection error of one broker, kept to say why once all of them are down.
    last_error: Option<String>,
}

/// Collects the connectivity errors of a process's Kafka clients and says them at a modest rate.
///
/// One broker's connection failing is remembered but not said (a cluster has others, and brokers
/// close idle connections); the brokers are out of reach when librdkafka reports all of them
/// down, when a handshake fails authentication, or when the process's own request got no answer
/// ([`BrokerWatch::unanswered`]).
pub struct BrokerWatch {
    brokers: String,
    every: Duration,
    state: Mutex<State>,
    say: Box<dyn Fn(&Notice) + Send + Sync>,
    /// Nothing more is said (the process is stopping).
    muted: AtomicBool,
}

impl fmt::Debug for BrokerWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BrokerWatch")
            .field("brokers", &self.brokers)
            .field("trouble", &self.trouble())
            .finish()
    }
}

impl BrokerWatch {
    /// A watch of `brokers` (the bootstrap list, as given) that hands what it has to say to `say`.
    pub fn new(brokers: &str, say: impl Fn(&Notice) + Send + Sync + 'static) -> BrokerWatch {
        BrokerWatch::every(brokers, REPEAT_EVERY, say)
    }

    /// As [`BrokerWatch::new`], repeating a lasting trouble every `every`.
    pub fn every(
        brokers: &str,
        every: Duration,
        say: impl Fn(&Notice) + Send + Sync + 'static,
    ) -> BrokerWatch {
        BrokerWatch {
            brokers: brokers.to_owned(),
            every,
            state: Mutex::new(State::default()),
            say: Box::new(say),
            muted: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A client's error callback: true when the error was one of connectivity or authentication
    /// (then the watch has it, and says it when due), false for any other error.
    pub fn client_error(&self, error: &KafkaError, reason: &str) -> bool {
        let Some(trouble) = Trouble::of(error) else {
            return false;
        };
        let reason = if reason.is_empty() {
            error.to_string()
        } else {
            reason.to_owned()
        };
        match (trouble, error.rdkafka_error_code()) {
            (Trouble::Authentication, _) => self.failed(Trouble::Authentication, &reason),
            // "1/1 brokers are down" says less than the connection error that came before it;
            // without one, the trouble waits for the next tick to be said, by when one may
            // have come.
            (_, Some(RDKafkaErrorCode::AllBrokersDown)) => {
                let mut state = self.lock();
                match state.last_error.clone() {
                    Some(why) => {
                        drop(state);
                        self.failed(Trouble::Unreachable, &why);
                    }
                    None if state.down.is_none() => {
                        state.down = Some(Down {
                            trouble: Trouble::Unreachable,
                            reason,
                            vague: true,
                            since: Instant::now(),
                            said: None,
                        });
                    }
                    None => {}
                }
            }
            _ => {
                let notice = {
                    let mut state = self.lock();
                    state.last_error = Some(reason.clone());
                    match state.down.as_mut() {
                        Some(d) if d.trouble == Trouble::Unreachable => {
                            let sharper = d.vague;
                            d.reason = reason;
                            d.vague = false;
                            if sharper {
                                d.said = None;
                            }
                            self.due(state.down.as_mut(), Instant::now())
                        }
                        _ => None,
                    }
                };
                if let Some(n) = notice {
                    self.tell(&n);
                }
            }
        }
        true
    }

    /// A request of the process's own got no answer from any broker: the brokers are out of
    /// reach, for the last connection error seen, or else for `otherwise`.
    pub fn unanswered(&self, otherwise: &str) {
        let why = self.lock().last_error.clone();
        match why {
            Some(why) => self.failed(Trouble::Unreachable, &why),
            None => self.failed_as(Trouble::Unreachable, otherwise, true),
        }
    }

    /// The brokers cannot be used, for `reason`.
    pub fn failed(&self, trouble: Trouble, reason: &str) {
        self.failed_as(trouble, reason, false);
    }

    fn failed_as(&self, trouble: Trouble, reason: &str, vague: bool) {
        let notice = {
            let mut state = self.lock();
            let now = Instant::now();
            match state.down.as_mut() {
                None => {
                    state.down = Some(Down {
                        trouble,
                        reason: reason.to_owned(),
                        vague,
                        since: now,
                        said: None,
                    });
                }
                // Authentication says more than a dropped connection (a broker without SASL
                // drops the connection of a client that speaks it); a new kind of trouble, or
                // a sharper reason for it, is said at once.
                Some(d)
                    if (trouble == Trouble::Authentication
                        || d.trouble == Trouble::Unreachable)
                        && (!vague || d.vague) =>
                {
                    if d.trouble != trouble || (d.vague && !vague) {
                        d.said = None;
                    }
                    d.trouble = trouble;
                    d.reason = reason.to_owned();
                    d.vague = vague;
                }
                Some(_) => {}
            }
            self.due(state.down.as_mut(), now)
        };
        if let Some(n) = notice {
            self.tell(&n);
        }
    }

    /// Says a lasting trouble again when it is due; call it now and then (the error callbacks
    /// stop when librdkafka suppresses repeats of the same error).
    pub fn tick(&self) {
        let notice = {
            let mut state = self.lock();
            self.due(state.down.as_mut(), Instant::now())
        };
        if let Some(n) = notice {
            self.tell(&n);
        }
    }

    fn due(&self, down: Option<&mut Down>, now: Instant) -> Option<Notice> {
        let d = down?;
        let first = d.said.is_none();
        if d.said.is_some_and(|at| now.duration_since(at) < self.every) {
            return None;
        }
        d.said = Some(now);
        Some(Notice::Trouble {
            trouble: d.trouble,
            brokers: self.brokers.clone(),
            reason: d.reason.clone(),
            since: now.duration_since(d.since),
            first,
        })
    }

    /// A broker answered: the trouble, if there was one, is over (and said to be, if it was said).
    pub fn reachable(&self) {
        let gone = {
            let mut state = self.lock();
            state.last_error = None;
            state.down.take()
        };
        if let Some(Down {
            since,
            said: Some(_),
            ..
        }) = gone
        {
            self.tell(&Notice::Recovered {
                brokers: self.brokers.clone(),
                after: since.elapsed(),
            });
        }
    }

    /// The trouble now, with librdkafka's reason and how long it has lasted.
    pub fn trouble(&self) -> Option<(Trouble, String, Duration)> {
        self.lock()
            .down
            .as_ref()
            .map(|d| (d.trouble, d.reason.clone(), d.since.elapsed()))
    }

    /// True while no trouble is known.
    pub fn is_reachable(&self) -> bool {
        self.lock().down.is_none()
    }

    /// Says nothing more from now on: the process is stopping, and a client still waiting on
    /// the brokers must not talk after it said so.
    pub fn mute(&self) {
        self.muted.store(true, Ordering::Release);
    }

    fn tell(&self, notice: &Notice) {
        if !self.muted.load(Ordering::Acquire) {
            (self.say)(notice);
        }
    }

    /// The last connection error of one broker, since a broker last answered.
    pub fn last_error(&self) -> Option<String> {
        self.lock().last_error.clone()
    }

    /// The bootstrap list watched.
    pub fn brokers(&self) -> &str {
        &self.brokers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn watch(every: Duration) -> (BrokerWatch, Arc<Mutex<Vec<Notice>>>) {
        let said = Arc::new(Mutex::new(Vec::new()));
        let s = said.clone();
        let w = BrokerWatch::every("h:1", every, move |n| s.lock().unwrap().push(n.clone()));
        (w, said)
    }

    fn transport() -> KafkaError {
        KafkaError::Global(RDKafkaErrorCode::BrokerTransportFailure)
    }

    #[test]
    fn says_a_trouble_at_once_then_at_its_rate_then_its_end() {
        let (w, said) = watch(Duration::from_millis(200));
        let refused = "h:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed: Connection refused";
        assert!(w.client_error(&transport(), refused));
        assert!(
            said.lock().unwrap().is_empty() && w.is_reachable(),
            "one broker's connection failing is not yet a trouble"
        );
        assert!(w.client_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down"
        ));
        for _ in 0..50 {
            assert!(w.client_error(&transport(), refused));
            w.tick();
        }
        assert!(w.client_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down"
        ));
        {
            let said = said.lock().unwrap();
            assert_eq!(said.len(), 1, "{said:?}");
            let text = said[0].to_string();
            assert!(
                text.starts_with("cannot reach the Kafka brokers at h:1: ")
                    && text.contains("Connection refused")
                    && text.contains("--brokers"),
                "{text}"
            );
        }
        std::thread::sleep(Duration::from_millis(250));
        w.tick();
        w.tick();
        {
            let said = said.lock().unwrap();
            assert_eq!(said.len(), 2, "{said:?}");
            let text = said[1].to_string();
            assert!(
                text.starts_with("still cannot reach") && text.contains("Connection refused"),
                "the vaguer `brokers are down` does not replace the reason: {text}"
            );
        }
        assert!(!w.is_reachable());
        w.reachable();
        w.reachable();
        let said = said.lock().unwrap();
        assert_eq!(said.len(), 3);
        assert!(!said[2].is_trouble() && said[2].to_string().contains("answer again"));
    }

    #[test]
    fn authentication_wins_over_a_dropped_connection_and_other_errors_are_not_taken() {
        let (w, said) = watch(Duration::from_secs(60));
        assert!(!w.client_error(&KafkaError::Global(RDKafkaErrorCode::MessageTimedOut), "x"));
        assert!(said.lock().unwrap().is_empty() && w.is_reachable());
        w.client_error(&transport(), "Disconnected while requesting ApiVersion");
        w.unanswered("no answer");
        assert_eq!(
            w.trouble().unwrap().1,
            "Disconnected while requesting ApiVersion",
            "the last connection error says why"
        );
        w.client_error(
            &KafkaError::Global(RDKafkaErrorCode::Authentication),
            "SASL authentication error: Authentication failed",
        );
        let (trouble, reason, _) = w.trouble().unwrap();
        assert_eq!(trouble, Trouble::Authentication);
        assert!(reason.contains("SASL"), "{reason}");
        w.client_error(&transport(), "Disconnected");
        assert_eq!(w.trouble().unwrap().0, Trouble::Authentication);
        // A vague trouble is said, and a sharper reason for it at once.
        let (v, said) = watch(Duration::from_secs(60));
        v.unanswered("no broker answered within 3s");
        v.client_error(
            &transport(),
            "Connect to ipv4#10.0.0.1:9092 failed: timed out",
        );
        v.client_error(
            &transport(),
            "Connect to ipv4#10.0.0.1:9092 failed: timed out",
        );
        {
            let said = said.lock().unwrap();
            assert_eq!(said.len(), 2, "{said:?}");
            assert!(said[1].to_string().contains("timed out"), "{}", said[1]);
        }
        // "All brokers down" without a reason yet waits for the next tick, which says the reason
        // that came meanwhile.
        let (d, said) = watch(Duration::from_secs(60));
        d.client_error(
            &KafkaError::Global(RDKafkaErrorCode::AllBrokersDown),
            "1/1 brokers are down",
        );
        assert!(said.lock().unwrap().is_empty() && !d.is_reachable());
        d.client_error(&transport(), "Send failed: Broken pipe");
        d.tick();
        {
            let said = said.lock().unwrap();
            assert_eq!(said.len(), 1, "{said:?}");
            assert!(said[0].to_string().contains("Broken pipe"), "{}", said[0]);
        }
        // A recovery nobody was told of the trouble of is not said either.
        let (quiet, said) = watch(Duration::from_secs(60));
        quiet.reachable();
        assert!(said.lock().unwrap().is_empty());
    }
}
