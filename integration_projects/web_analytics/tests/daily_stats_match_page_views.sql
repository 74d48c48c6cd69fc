-- Every day's total in daily_page_stats equals the page views of that day.
select s.event_date
from (select event_date, sum(views) as views from {{ ref('daily_page_stats') }} group by event_date) s
join (select event_date, count(*) as views from {{ ref('page_views') }} group by event_date) v
  on s.event_date = v.event_date
where s.views <> v.views
