//! A host's bookkeeping around a [`crate::Aggregator`]: callers hand over groups of
//! transactions and wait for one reply each, while the aggregator answers ticket by ticket, in
//! whatever order its batches finish. Pure; the host says where a group's replies go (`To`: a
//! channel, a callback) and sends them when [`Replies::answer`] returns them.

use std::collections::HashMap;

use specie_role::Ticket;

use crate::aggregator::EndorseReply;

/// One group's replies so far, how many are missing, and where they go.
struct Group<R, To> {
    replies: Vec<Option<EndorseReply<R>>>,
    missing: usize,
    to: To,
}

/// Groups of submissions waiting for their replies, by the tickets they were submitted under.
pub struct Replies<R, To> {
    next_ticket: Ticket,
    next_group: u64,
    /// Ticket → (group, position in it).
    tickets: HashMap<Ticket, (u64, usize)>,
    groups: HashMap<u64, Group<R, To>>,
}

impl<R, To> Default for Replies<R, To> {
    fn default() -> Self {
        Replies {
            next_ticket: 0,
            next_group: 0,
            tickets: HashMap::new(),
            groups: HashMap::new(),
        }
    }
}

/// A finished group: where its replies go, and the replies in the order of its items.
pub type Answered<R, To> = (To, Vec<EndorseReply<R>>);

impl<R, To> Replies<R, To> {
    /// Opens a group of `count` submissions answered to `to`: the tickets to submit them under,
    /// in order. An empty group is answered at once, and returned.
    pub fn open(&mut self, count: usize, to: To) -> (Vec<Ticket>, Option<Answered<R, To>>) {
        let group = self.next_group;
        self.next_group += 1;
        if count == 0 {
            return (vec![], Some((to, vec![])));
        }
        let tickets: Vec<Ticket> = (0..count)
            .map(|position| {
                let ticket = self.next_ticket;
                self.next_ticket += 1;
                self.tickets.insert(ticket, (group, position));
                ticket
            })
            .collect();
        let replies = std::iter::repeat_with(|| None).take(count).collect();
        self.groups.insert(
            group,
            Group {
                replies,
                missing: count,
                to,
            },
        );
        (tickets, None)
    }

    /// Records the reply to `ticket`; if that was its group's last, the group's replies.
    pub fn answer(&mut self, ticket: Ticket, reply: EndorseReply<R>) -> Option<Answered<R, To>> {
        let (group, position) = self.tickets.remove(&ticket)?;
        let waiting = self.groups.get_mut(&group)?;
        if waiting.replies[position].replace(reply).is_none() {
            waiting.missing -= 1;
        }
        if waiting.missing > 0 {
            return None;
        }
        let done = self.groups.remove(&group)?;
        let replies = done
            .replies
            .into_iter()
            .map(|r| r.unwrap_or(EndorseReply::Failed))
            .collect();
        Some((done.to, replies))
    }

    /// Groups still waiting.
    pub fn waiting(&self) -> usize {
        self.groups.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_is_answered_once_in_its_own_order_whatever_order_tickets_come_in() {
        let mut replies: Replies<&'static str, &'static str> = Replies::default();
        let (first, none) = replies.open(3, "first");
        assert!(none.is_none());
        let (second, _) = replies.open(1, "second");
        assert_eq!(replies.open(0, "empty").1, Some(("empty", vec![])));
        assert!(replies.answer(first[2], EndorseReply::Busy).is_none());
        assert!(replies.answer(first[0], EndorseReply::Failed).is_none());
        assert_eq!(
            replies.answer(second[0], EndorseReply::NotLeading),
            Some(("second", vec![EndorseReply::NotLeading]))
        );
        let refused = EndorseReply::Refused { reasons: vec![] };
        let answered = replies.answer(first[1], refused.clone());
        assert_eq!(
            answered,
            Some(("first", vec![EndorseReply::Failed, refused, EndorseReply::Busy]))
        );
        // A ticket answered twice, or never handed out, changes nothing.
        assert!(replies.answer(first[1], EndorseReply::Busy).is_none());
        assert!(replies.answer(999, EndorseReply::Busy).is_none());
        assert_eq!(replies.waiting(), 0);
    }
}
